package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/managedjobs"
)

func TestRemovalPlan(t *testing.T) {
	left := leftOnWorker{worker: "worker-1", managerID: "0123456789abcdef", finished: 3}
	got := removalPlan("worker-1", false, []managedjobs.Job{{Namespace: "team-a", Name: "train", Worker: "worker-1", Phase: "Running"}},
		"jobferry-system", "worker-1-kubeconfig", left)
	want := `remove worker-1 would (dry run, nothing changed):
- cordon workercluster/worker-1: no new Job is placed there
- wait for the 1 unfinished Jobs placed on worker-1:
    team-a/train (Running, on worker worker-1)
- delete workercluster/worker-1
- delete secret/worker-1-kubeconfig from jobferry-system
Left on the worker, which this manager no longer reaches (delete them there when no longer needed):
  mirrors of finished Jobs (3 finished Jobs were placed there): kubectl --context worker-1 get jobs -A -l jobferry.dev/manager-id=0123456789abcdef
  namespaces jobferry made there: kubectl --context worker-1 get namespaces -l jobferry.dev/manager-id=0123456789abcdef
Then uninstall the worker side there (with the release and namespace it was installed as):
  helm uninstall jobferry-worker -n jobferry-system --kube-context worker-1
`
	if got != want {
		t.Errorf("removalPlan:\n%s\nwant:\n%s", got, want)
	}
	got = removalPlan("worker-2", true, nil, "jobferry-system", "", leftOnWorker{worker: "worker-2"})
	for _, line := range []string{"- keep workercluster/worker-2 cordoned\n", "- wait for no Job: none placed on worker-2 is unfinished\n", "-l jobferry.dev/manager-id=<manager-id>\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("removalPlan of a cordoned worker without Jobs lacks %q:\n%s", line, got)
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
