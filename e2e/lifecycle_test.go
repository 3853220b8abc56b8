//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// suspendTrace records the distinct (Suspended condition, startTime) states a
// Job goes through, as seen by a watch.
type suspendTrace struct {
	mu     sync.Mutex
	states []string
	starts []string
}

func (tr *suspendTrace) add(job *batchv1.Job) {
	state := "never-suspended"
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended {
			state = fmt.Sprintf("Suspended=%s/%s", c.Status, c.Reason)
		}
	}
	start := "startTime=nil"
	if job.Status.StartTime != nil {
		start = "startTime=set"
	}
	state += " " + start
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n := len(tr.states); n == 0 || tr.states[n-1] != state {
		tr.states = append(tr.states, state)
	}
	if job.Status.StartTime != nil {
		s := job.Status.StartTime.UTC().Format(time.RFC3339)
		if n := len(tr.starts); n == 0 || tr.starts[n-1] != s {
			tr.starts = append(tr.starts, s)
		}
	}
}

func (tr *suspendTrace) snapshot() ([]string, []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.states...), append([]string(nil), tr.starts...)
}

func traceJob(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) *suspendTrace {
	t.Helper()
	w, err := c.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	tr := &suspendTrace{}
	go func() {
		for ev := range w.ResultChan() {
			if job, ok := ev.Object.(*batchv1.Job); ok && ev.Type != watch.Error {
				tr.add(job)
			}
		}
	}()
	t.Cleanup(w.Stop)
	return tr
}

// Suspending a dispatched Job on the manager suspends its mirror: the worker
// deletes the pods without counting them failed, and Suspended=True, active 0
// and the startTime reset come back without a rejected write; resuming runs
// it to Complete, the manager's startTime moving with the worker's. The
// manager goes through the same Suspended/startTime states, in the same
// order, as the worker's Job controller produced — on each worker, so under
// kube-controller-manager and under the jobferry worker's controller.
func TestSuspendAndResumeDispatchedJob(t *testing.T) {
	d := startDispatchEnv(t)
	d.onEachWorker(t, func(t *testing.T, worker string) { suspendAndResume(t, d, worker) })
}

func suspendAndResume(t *testing.T, d *dispatchEnv, workerName string) {
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "pausable", 6*time.Second)
	managerTrace := traceJob(ctx, t, d.manager, ns, job.Name)
	worker := d.dispatchTo(ctx, t, job, workerName)
	mirrorTrace := traceJob(ctx, t, worker, ns, job.Name)
	running := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running on the manager", func(j *batchv1.Job) bool {
		return j.Status.Active == 1 && j.Status.StartTime != nil
	})
	firstStart := running.Status.StartTime.DeepCopy()

	setManagerSuspend(ctx, t, d, ns, job.Name, true)
	suspended := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "Suspended=True on the manager", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobSuspended) != nil && j.Status.Active == 0 && ptr.Deref(j.Status.Terminating, 0) == 0
	})
	if suspended.Status.Failed != 0 || suspended.Status.StartTime != nil {
		t.Errorf("after suspending: %s startTime=%v; want failed=0 and startTime reset", describeStatus(suspended), suspended.Status.StartTime)
	}
	if pods := jobPods(ctx, t, worker, ns, job.Name); len(pods) != 0 {
		t.Errorf("%d pods left on the worker while suspended", len(pods))
	}

	setManagerSuspend(ctx, t, d, ns, job.Name, false)
	done := pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "Complete after resuming", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	if done.Status.StartTime == nil || !done.Status.StartTime.After(firstStart.Time) {
		t.Errorf("startTime after resuming %v, want later than the first start %v", done.Status.StartTime, firstStart)
	}
	if done.Status.Failed != 0 || done.Status.Succeeded != 1 {
		t.Errorf("finished with %s, want succeeded=1 failed=0", describeStatus(done))
	}

	mirrorStates, mirrorStarts := mirrorTrace.snapshot()
	managerStates, managerStarts := managerTrace.snapshot()
	// The manager Job exists before its mirror (placement), so its trace may
	// begin with states the mirror never had; compare from the mirror's first.
	for len(managerStates) > 0 && len(mirrorStates) > 0 && managerStates[0] != mirrorStates[0] {
		managerStates = managerStates[1:]
	}
	if diff := cmp.Diff(mirrorStates, managerStates); diff != "" {
		t.Errorf("Suspended/startTime sequence (-worker +manager):\n%s", diff)
	}
	if diff := cmp.Diff(mirrorStarts, managerStarts); diff != "" {
		t.Errorf("startTime values (-worker +manager):\n%s", diff)
	}
	t.Logf("worker and manager went through %v", mirrorStates)
	d.assertNoRejectedStatusWrites(t)
}

func setManagerSuspend(ctx context.Context, t *testing.T, d *dispatchEnv, ns, name string, suspend bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	if _, err := d.manager.BatchV1().Jobs(ns).Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// `kubectl jobferry cordon` stops placements on a worker while its running
// Jobs continue; `kubectl jobferry uncordon` allows them again.
func TestCordonStopsNewPlacementsOnly(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	cli := func(args ...string) {
		t.Helper()
		bin, err := localcluster.BinDir()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "kubectl-jobferry"), append(args, "--kubeconfig", d.Manager.KubeconfigPath)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl jobferry %v: %v\n%s", args, err, out)
		}
	}
	cli("cordon", "worker-1")
	t.Cleanup(func() { cli("uncordon", "worker-1"); cli("uncordon", "worker-2") })

	long := sleepJob(ns, "long", 5*time.Second)
	if w, _ := dispatchOne(ctx, t, d, long); w != "worker-2" {
		t.Fatalf("with worker-1 cordoned the Job went to %s", w)
	}
	pollJob(ctx, t, d.manager, ns, long.Name, time.Minute, "running on worker-2", func(j *batchv1.Job) bool { return j.Status.Active == 1 })

	cli("uncordon", "worker-1")
	cli("cordon", "worker-2")
	for i := range 5 {
		job := sleepJob(ns, fmt.Sprintf("after-cordon-%d", i), time.Second)
		if w, _ := dispatchOne(ctx, t, d, job); w != "worker-1" {
			t.Errorf("%s went to cordoned %s", job.Name, w)
		}
	}
	pollJob(ctx, t, d.manager, ns, long.Name, time.Minute, "the Job on the cordoned worker completes", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
}

// A manager Job deleted while its worker is unreachable is let go (with an
// Event); its mirror, left on the worker, is garbage-collected once the worker
// is reachable again.
func TestMirrorOfJobDeletedWhileWorkerUnreachableIsCollected(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "orphan", time.Hour)
	workerName, worker := dispatchOne(ctx, t, d, job)
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })

	// Cut the manager off the worker, as a network partition would: the
	// worker's kubeconfig Secret now points at a closed port.
	restore := cutOff(ctx, t, d.managerClient, workerName)
	t.Cleanup(restore)
	if cond := waitConnected(ctx, t, d, workerName, metav1.ConditionFalse); cond.Reason != v1alpha1.ReasonUnreachable {
		t.Errorf("a worker whose API server does not answer shows reason %s (%s), want %s", cond.Reason, cond.Message, v1alpha1.ReasonUnreachable)
	}

	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := d.manager.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the manager Job was held while its worker was unreachable: %v", err)
	}
	if mirrors, err := worker.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(mirrors.Items) != 1 {
		t.Fatalf("want the mirror still on the unreachable worker, got %v (%v)", mirrors, err)
	}

	restore()
	waitConnected(ctx, t, d, workerName, metav1.ConditionTrue)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		mirrors, err := worker.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(mirrors.Items) == 0 && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("the orphaned mirror or its pods survived the worker's return: %v", err)
	}
}

func waitConnected(ctx context.Context, t *testing.T, d *dispatchEnv, worker string, want metav1.ConditionStatus) *metav1.Condition {
	t.Helper()
	return waitWorkerCondition(ctx, t, d.managerClient, worker, v1alpha1.ConditionConnected, want, time.Minute)
}

// waitWorkerCondition waits until the WorkerCluster's condition has the
// status want, and returns it.
func waitWorkerCondition(ctx context.Context, t *testing.T, c client.Client, worker, condType string, want metav1.ConditionStatus, timeout time.Duration) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(wc.Status.Conditions, condType)
		return cond != nil && cond.Status == want, nil
	})
	if err != nil {
		t.Fatalf("%s never became %s=%s: %v", worker, condType, want, err)
	}
	return cond
}
