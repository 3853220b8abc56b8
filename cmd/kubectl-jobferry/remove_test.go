package main

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/managedjobs"
)

func TestRemovalPlan(t *testing.T) {
	left := leftOnWorker{worker: "worker-1", managerID: "0123456789abcdef", finished: 3}
	got := removalPlan("worker-1", false, []managedjobs.Job{{Namespace: "team-a", Name: "train", Worker: "worker-1", Phase: "Running"}},
		[]string{"team-a/old-attempt"}, "jobferry-system", "worker-1-kubeconfig", "", left)
	want := `remove worker-1 would (dry run, nothing changed):
- cordon workercluster/worker-1: no new Job is placed there
- wait for 1 unfinished Jobs placed on worker-1:
    team-a/train (Running, on worker worker-1)
  1 mirrors still running on worker-1:
    team-a/old-attempt
- delete workercluster/worker-1
- delete secret/worker-1-kubeconfig from jobferry-system
Left on the worker, which this manager no longer reaches (delete them there when no longer needed):
  mirrors of finished Jobs (3): kubectl --context worker-1 get jobs -A -l jobferry.dev/manager-id=0123456789abcdef
  namespaces jobferry made there: kubectl --context worker-1 get namespaces -l jobferry.dev/manager-id=0123456789abcdef
Then uninstall the worker side there (with the release and namespace it was installed as):
  helm uninstall jobferry-worker -n jobferry-system --kube-context worker-1
`
	if got != want {
		t.Errorf("removalPlan:\n%s\nwant:\n%s", got, want)
	}
	got = removalPlan("worker-2", true, nil, nil, "jobferry-system", "shared-kubeconfig", "worker-3", leftOnWorker{worker: "worker-2", managerID: "0123456789abcdef", finished: -1})
	for _, line := range []string{
		"- keep workercluster/worker-2 cordoned\n",
		"- wait for nothing: no Job placed on worker-2 is unfinished, no mirror runs there\n",
		"- keep secret/shared-kubeconfig in jobferry-system: WorkerCluster worker-3 uses it too\n",
		"  mirrors of finished Jobs: kubectl",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("removalPlan of a cordoned worker without Jobs, sharing its Secret, lacks %q:\n%s", line, got)
		}
	}
}

func TestCordonSeen(t *testing.T) {
	wc := func(cordoned bool, generation, observed int64) *v1alpha1.WorkerCluster {
		w := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Generation: generation}, Spec: v1alpha1.WorkerClusterSpec{Cordoned: cordoned}}
		if observed > 0 {
			w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, ObservedGeneration: observed}}
		}
		return w
	}
	for _, c := range []struct {
		name string
		wc   *v1alpha1.WorkerCluster
		want bool
	}{
		{"judged at this generation", wc(true, 3, 3), true},
		{"judged before the cordon", wc(true, 3, 2), false},
		{"never judged", wc(true, 3, 0), false},
		{"uncordoned meanwhile", wc(false, 4, 4), false},
	} {
		if got := cordonSeen(c.wc); got != c.want {
			t.Errorf("%s: cordonSeen = %v, want %v", c.name, got, c.want)
		}
	}
}

// A mirror runs until it is finished and its pods are gone.
func TestMirrorRuns(t *testing.T) {
	finished := batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	for _, c := range []struct {
		name   string
		status batchv1.JobStatus
		want   bool
	}{
		{"running", batchv1.JobStatus{Active: 1}, true},
		{"not started", batchv1.JobStatus{}, true},
		{"finished", finished, false},
		{"finished, a pod still active", func() batchv1.JobStatus { s := *finished.DeepCopy(); s.Active = 1; return s }(), true},
		{"finished, a pod terminating", func() batchv1.JobStatus { s := *finished.DeepCopy(); s.Terminating = ptr.To[int32](1); return s }(), true},
	} {
		if got := mirrorRuns(&batchv1.Job{Status: c.status}); got != c.want {
			t.Errorf("%s: mirrorRuns = %v, want %v", c.name, got, c.want)
		}
	}
}
