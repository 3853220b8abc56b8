package dispatch

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Explain says where Place would put the Job, each other worker's reason,
// and for each the nearest change that would make it take the Job.
func TestExplain(t *testing.T) {
	general := func(free string) v1alpha1.NodePool {
		return pool("general", res("cpu", free, "pods", "110"), res("cpu", "16", "pods", "110"))
	}
	cordoned := worker("w-cordoned", general("16"))
	cordoned.Cordoned = true
	down := worker("w-down", general("16"))
	down.Connected = false
	other := worker("w-other-team", general("16"))
	other.Namespaces = []string{"team-b"}
	for _, tc := range []struct {
		name    string
		job     int32 // pods of 1 cpu at once
		workers []Worker
		chosen  string
		// change, per worker passed over: a part of its nearest change.
		change map[string]string
		never  string
	}{
		{
			name: "fits two: the one left freer is chosen, the other fits too", job: 4,
			workers: []Worker{worker("w1", general("8")), worker("w2", general("12"))},
			chosen:  "w2", change: map[string]string{"w1": ""},
		},
		{
			name: "fits nowhere now: the room each pool lacks, and nothing it could never run", job: 10,
			workers: []Worker{worker("w1", general("8")), worker("w2", general("6")), cordoned, down, other},
			change: map[string]string{
				"w1":           "pool general needs 2 more cpu (8 free of 16 allocatable, the Job's pods need 10)",
				"w2":           "pool general needs 4 more cpu",
				"w-cordoned":   "kubectl jobferry uncordon w-cordoned",
				"w-down":       "Connected condition",
				"w-other-team": "add ns to WorkerCluster w-other-team's spec.namespaces",
			},
		},
		{
			name: "fits nowhere ever: more than any pool has at once", job: 40,
			workers: []Worker{worker("w1", general("16"))},
			change:  map[string]string{"w1": "a Job that asks for less at once: no pool of w1 that accepts its pods could hold them all at once"},
			never:   "w1: pool general: needs 40 cpu at once, its nodes have 16 allocatable",
		},
		{
			name: "the nearest pool is one that could ever hold the Job, not the emptiest", job: 16,
			workers: []Worker{worker("w1", pool("a-small", res("cpu", "4", "pods", "110"), res("cpu", "4", "pods", "110")),
				pool("b-large", res("cpu", "1", "pods", "110"), res("cpu", "64", "pods", "110")))},
			change: map[string]string{"w1": "pool b-large needs 15 more cpu (1 free of 64 allocatable, the Job's pods need 16)"},
		},
		{
			name: "free net of Jobs placed there but not in the summary yet", job: 2,
			workers: []Worker{func() Worker {
				w := worker("w1", general("2"))
				w.Assumed = map[string]corev1.ResourceList{"general": res("cpu", "3")}
				return w
			}()},
			change: map[string]string{"w1": "pool general needs 3 more cpu (-1 free of 16 allocatable, the Job's pods need 2)"},
		},
		{
			name: "a tainted pool only", job: 1,
			workers: []Worker{worker("w1", pool("gpu", res("cpu", "16", "pods", "110"), res("cpu", "16", "pods", "110"), tainted))},
			change:  map[string]string{"w1": "tolerations, node selector or affinity"},
			never:   "w1: pool gpu",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Explain(job("1", tc.job), tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			if e.Worker != tc.chosen {
				t.Errorf("chosen %q, want %q", e.Worker, tc.chosen)
			}
			if chosen, ok := e.Chosen(); ok != (tc.chosen != "") || chosen.Name != tc.chosen || chosen.Change != "" {
				t.Errorf("Chosen() = %+v, %t", chosen, ok)
			}
			if len(e.Workers) != len(tc.workers) {
				t.Errorf("%d verdicts for %d workers", len(e.Workers), len(tc.workers))
			}
			for _, v := range e.Workers {
				want, ok := tc.change[v.Name]
				if v.Chosen {
					continue
				}
				if !ok {
					t.Errorf("%s: no verdict expected, got %+v", v.Name, v)
					continue
				}
				if v.Why == "" || !strings.Contains(v.Change, want) || (want == "" && v.Change != "") {
					t.Errorf("%s: why %q, change %q; want a reason and a change saying %q", v.Name, v.Why, v.Change, want)
				}
			}
			if !strings.Contains(e.Never, tc.never) || (tc.never == "" && e.Never != "") {
				t.Errorf("never %q, want %q", e.Never, tc.never)
			}
		})
	}
}

// A shortfall reads in the request's own units.
func TestShortfall(t *testing.T) {
	for _, tc := range []struct{ want, have, short string }{
		{"4Gi", "1Gi", "3Gi"},
		{"5G", "1500M", "3500M"},
		{"2", "500m", "1500m"},
		{"10", "8", "2"},
	} {
		if got := shortfall(resource.MustParse(tc.want), resource.MustParse(tc.have)); got != tc.short {
			t.Errorf("shortfall(%s, %s) = %s, want %s", tc.want, tc.have, got, tc.short)
		}
	}
}
