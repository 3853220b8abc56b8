package workers

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestMayDelete(t *testing.T) {
	job := func(labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	ours := job(map[string]string{v1alpha1.ManagerIDLabel: "a"})
	theirs := job(map[string]string{v1alpha1.ManagerIDLabel: "b"})
	legacy := job(map[string]string{})
	for _, tc := range []struct {
		name   string
		m      *batchv1.Job
		shared bool
		want   bool
	}{
		{"ours", ours, false, true},
		{"ours, the origin shared", ours, true, true},
		{"another installation's", theirs, false, false},
		{"another installation's, the origin shared", theirs, true, false},
		{"unlabelled (an earlier manager's)", legacy, false, true},
		{"unlabelled, the origin shared: it may be theirs", legacy, true, false},
	} {
		if got := MayDelete(tc.m, "a", tc.shared); got != tc.want {
			t.Errorf("%s: mayDelete = %v, want %v", tc.name, got, tc.want)
		}
	}
}
