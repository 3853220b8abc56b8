//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// drainedTaint empties a pool for new pods without touching its nodes
// otherwise.
var drainedTaint = corev1.Taint{Key: "e2e.jobferry.dev/drained", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// A Job placed on worker-1 whose pool is then tainted: the worker's
// scheduler records FailedScheduling on the mirror's pod, and the manager
// Job gets it as a Warning Event naming the worker and the pod, once however
// often the scheduler tries again; `kubectl describe job` and `kubectl
// jobferry describe job` on the manager show it. Untainted, the Job runs and
// completes.
//
// The worker's scheduler is stopped while the Job is placed and tainted, so
// the pod cannot be bound before the pool is emptied (placement reads the
// pool's free room, which it had).
func TestWorkerFailureReasonsReachTheManagerJob(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	w1 := d.Workers[0]
	if w1.Name != "worker-1" {
		t.Fatalf("unexpected worker order: %s", w1.Name)
	}
	worker := d.workers[w1.Name]

	restartScheduler := stopComponent(t, w1, "kube-scheduler")
	job := sleepJob(ns, "drained", 2*time.Second)
	d.dispatchTo(ctx, t, job, w1.Name)
	pod := waitPendingPod(ctx, t, worker, ns, job.Name)

	tainted := taintUntaintedNodes(ctx, t, worker, drainedTaint)
	t.Cleanup(func() { untaint(context.Background(), t, worker, tainted, drainedTaint) })
	restartScheduler()

	onWorker := waitEvent(ctx, t, worker, ns, pod, "FailedScheduling", time.Minute, "untolerated taint")
	onManager := waitEvent(ctx, t, d.manager, ns, job.Name, "FailedScheduling", 30*time.Second,
		"worker worker-1, pod "+ns+"/"+pod+": 0/", "untolerated taint")
	if onManager.Type != corev1.EventTypeWarning {
		t.Errorf("the forwarded Event is of type %s, want Warning", onManager.Type)
	}
	t.Logf("the worker's FailedScheduling (%s) reached the manager Job %s later: %s",
		eventTimeOf(onWorker).Format(time.RFC3339Nano), eventTimeOf(onManager).Sub(eventTimeOf(onWorker)).Round(time.Millisecond), onManager.Message)

	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	described, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", d.Manager.KubeconfigPath,
		"describe", "job", job.Name, "-n", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl describe job: %v\n%s", err, described)
	}
	if !containsAll(string(described), "FailedScheduling", "worker worker-1, pod "+ns+"/"+pod, "untolerated taint") {
		t.Errorf("kubectl describe job on the manager does not show the worker's FailedScheduling:\n%s", described)
	}
	t.Logf("kubectl describe job %s -n %s (manager):\n%s", job.Name, ns, described)
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-jobferry"), "describe", "job", job.Name, "-n", ns,
		"--kubeconfig", d.Manager.KubeconfigPath).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl jobferry describe job: %v\n%s", err, out)
	}
	if !containsAll(string(out), "Events on the manager", "FailedScheduling", "worker worker-1, pod "+ns+"/"+pod) {
		t.Errorf("kubectl jobferry describe job does not show the forwarded FailedScheduling:\n%s", out)
	}

	// The scheduler tries again (a restarted one tries every pending pod at
	// once): the worker has the reason twice, the manager Job keeps one.
	if _, err := w1.RestartComponent("kube-scheduler"); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := eventCount(ctx, worker, ns, pod, "FailedScheduling")
		return n >= 2, err
	})
	if err != nil {
		t.Fatalf("the worker's scheduler did not try the pod again: %v", err)
	}
	untaint(ctx, t, worker, tainted, drainedTaint)
	pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	assertEventCount(ctx, t, d.manager, ns, job.Name, "FailedScheduling", 1)
}

// waitPendingPod waits for the mirror's one pod and returns its name.
func waitPendingPod(ctx context.Context, t *testing.T, worker kubernetes.Interface, ns, job string) string {
	t.Helper()
	var name string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		if pods.Items[0].Spec.NodeName != "" {
			t.Fatalf("pod %s was bound to %s with the scheduler stopped", pods.Items[0].Name, pods.Items[0].Spec.NodeName)
		}
		name = pods.Items[0].Name
		return true, nil
	})
	if err != nil {
		t.Fatalf("no pod of mirror %s/%s: %v", ns, job, err)
	}
	return name
}

// taintUntaintedNodes adds taint to every node that has none (worker-1's
// general pool) and returns their names.
func taintUntaintedNodes(ctx context.Context, t *testing.T, c kubernetes.Interface, taint corev1.Taint) []string {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) > 0 {
			continue
		}
		names = append(names, n.Name)
	}
	editTaints(ctx, t, c, names, func(taints []corev1.Taint) []corev1.Taint { return append(taints, taint) })
	if len(names) == 0 {
		t.Fatal("no untainted node to taint")
	}
	return names
}

// untaint removes taint (by key) from the nodes; a node without it is left
// alone, so it may run twice.
func untaint(ctx context.Context, t *testing.T, c kubernetes.Interface, names []string, taint corev1.Taint) {
	t.Helper()
	editTaints(ctx, t, c, names, func(taints []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(taints, func(tt corev1.Taint) bool { return tt.Key == taint.Key })
	})
}

func editTaints(ctx context.Context, t *testing.T, c kubernetes.Interface, names []string, edit func([]corev1.Taint) []corev1.Taint) {
	t.Helper()
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = edit(n.Spec.Taints)
			_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Errorf("editing the taints of node %s: %v", name, err)
		}
	}
}

// eventTimeOf is when an Event first happened.
func eventTimeOf(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}
