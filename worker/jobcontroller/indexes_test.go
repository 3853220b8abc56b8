package jobcontroller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobferry/jobferry/internal/jobindex"
)

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
			got := firstPendingIndexes(tc.count, tc.completions, jobindex.Parse(tc.succeeded, tc.completions), tc.holding)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
