package dispatch

import (
	"strings"
	"testing"

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
			change:  map[string]string{"w1": "pool general needs 24 more cpu (16 free of 16 allocatable"},
			never:   "w1: pool general: needs 40 cpu at once, its nodes have 16 allocatable",
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
