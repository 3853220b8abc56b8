package jobcontroller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIntervalsRoundTrip(t *testing.T) {
	cases := map[string]struct {
		in          string
		completions int
		want        string
		total       int
	}{
		"empty":                      {in: "", completions: 5, want: "", total: 0},
		"single":                     {in: "3", completions: 5, want: "3", total: 1},
		"two consecutive as a pair":  {in: "1,2", completions: 5, want: "1,2", total: 2},
		"three as a range":           {in: "1,2,3", completions: 5, want: "1-3", total: 3},
		"adjacent ranges merge":      {in: "0-2,3-4", completions: 10, want: "0-4", total: 5},
		"beyond completions dropped": {in: "1,4-9", completions: 6, want: "1,4,5", total: 3},
		"malformed entries skipped":  {in: "1,x,3", completions: 5, want: "1,3", total: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := parseIntervals(tc.in, tc.completions)
			if got.String() != tc.want || got.total() != tc.total {
				t.Errorf("parseIntervals(%q) = %q (total %d), want %q (total %d)", tc.in, got.String(), got.total(), tc.want, tc.total)
			}
		})
	}
}

func TestIntervalsWithIndexesAndHas(t *testing.T) {
	iv := parseIntervals("0,5-7", 20).withIndexes([]int{1, 3, 8, 19})
	if got, want := iv.String(), "0,1,3,5-8,19"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for ix, want := range map[int]bool{0: true, 2: false, 3: true, 6: true, 9: false, 19: true, 20: false} {
		if iv.has(ix) != want {
			t.Errorf("has(%d) = %t, want %t", ix, !want, want)
		}
	}
}

func indexedPod(ix string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: ix}}}
}

func TestFirstPendingIndexes(t *testing.T) {
	cases := map[string]struct {
		count, completions int
		succeeded          string
		holding            []*corev1.Pod
		want               []int
	}{
		"none wanted":                     {count: 0, completions: 5, want: nil},
		"from zero":                       {count: 3, completions: 5, want: []int{0, 1, 2}},
		"skips succeeded and held":        {count: 3, completions: 6, succeeded: "0,2", holding: []*corev1.Pod{indexedPod("1"), indexedPod("4")}, want: []int{3, 5}},
		"bounded by completions":          {count: 10, completions: 3, succeeded: "1", want: []int{0, 2}},
		"pods without an index hold none": {count: 2, completions: 4, holding: []*corev1.Pod{{}}, want: []int{0, 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := firstPendingIndexes(tc.count, tc.completions, parseIntervals(tc.succeeded, tc.completions), tc.holding)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateNameWithIndex(t *testing.T) {
	long := "a-very-long-job-name-that-goes-on-and-on-and-on-and-on-and-on"
	got := generateNameWithIndex(long, 12)
	if len(got) != 58 || got[len(got)-4:] != "-12-" {
		t.Errorf("generateNameWithIndex(long, 12) = %q (%d chars), want 58 chars ending in -12-", got, len(got))
	}
	if got := generateNameWithIndex("job", 3); got != "job-3-" {
		t.Errorf("got %q, want job-3-", got)
	}
}
