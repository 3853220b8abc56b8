package managedjobs

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestListKeepsTheUnfinishedJobsJobferryManages(t *testing.T) {
	job := func(ns, name, managedBy, worker string, conditions ...batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if managedBy != "" {
			j.Spec.ManagedBy = ptr.To(managedBy)
		}
		if worker != "" {
			j.Annotations = map[string]string{v1alpha1.WorkerAnnotation: worker}
		}
		for _, c := range conditions {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return j
	}
	kube := fake.NewClientset(
		job("b", "running-on-1", v1alpha1.ManagerManagedBy, "worker-1"),
		job("a", "waiting", v1alpha1.ManagerManagedBy, ""),
		job("a", "done-on-1", v1alpha1.ManagerManagedBy, "worker-1", batchv1.JobComplete),
		job("a", "failed-on-2", v1alpha1.ManagerManagedBy, "worker-2", batchv1.JobFailed),
		job("a", "on-2", v1alpha1.ManagerManagedBy, "worker-2"),
		job("a", "not-ours", "kueue.x-k8s.io/multikueue", "worker-1"),
		job("a", "plain", "", ""),
	)
	for worker, want := range map[string]struct {
		unfinished string
		finished   int
	}{
		"":         {"a/on-2 (Pending, on worker worker-2)|a/waiting (Pending, not placed yet)|b/running-on-1 (Pending, on worker worker-1)", 2},
		"worker-1": {"b/running-on-1 (Pending, on worker worker-1)", 1},
		"worker-3": {"", 0},
	} {
		unfinished, finished, err := List(t.Context(), kube, worker)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range unfinished {
			got = append(got, j.String())
		}
		if strings.Join(got, "|") != want.unfinished || finished != want.finished {
			t.Errorf("List(%q) = %q, %d finished; want %q, %d", worker, got, finished, want.unfinished, want.finished)
		}
	}
}

func TestLinesShowsAtMostMax(t *testing.T) {
	jobs := []Job{{Namespace: "a", Name: "1", Phase: "Running", Worker: "w"}, {Namespace: "a", Name: "2", Phase: "Pending"}, {Namespace: "a", Name: "3", Phase: "Pending"}}
	want := "  a/1 (Running, on worker w)\n  a/2 (Pending, not placed yet)\n  ... and 1 more\n"
	if got := Lines(jobs, 2); got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}
