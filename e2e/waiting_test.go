//go:build e2e

package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// A Job that waits for a worker says so: `kubectl get job` shows it
// Suspended (not Running), its Suspended condition says it waits for a
// worker and why; once dispatched the mirror's status replaces it, with every
// write accepted, and the manager ends with the mirror's final status. A Job
// its user created suspended shows JobSuspended, as kube-controller-manager
// would, and runs once resumed. On each worker's Job controller.
func TestWaitingJobSaysWhy(t *testing.T) {
	d := startDispatchEnv(t)
	d.onEachWorker(t, func(t *testing.T, worker string) { waitingJobSaysWhy(t, d, worker) })
}

func waitingJobSaysWhy(t *testing.T, d *dispatchEnv, workerName string) {
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	rec := recordWorkers(ctx, t, d, ns)
	job := sleepJob(ns, "waiting", 2*time.Second)
	job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=nowhere"}
	conditions := watchConditions(t, d, ns, job.Name)
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := pollJob(ctx, t, d.manager, ns, job.Name, 30*time.Second, "Suspended=True, waiting for a worker", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == policy.ReasonNoWorkerFits
	})
	t.Logf("waiting: %s", suspendedCondition(held).Message)
	if msg := suspendedCondition(held).Message; !containsAll(msg, "no worker fits", "cluster selector", "worker-1", "worker-2") {
		t.Errorf("the condition does not say why the Job waits: %q", msg)
	}
	if got := kubectlStatus(ctx, t, d.Manager.KubeconfigPath, ns, job.Name); got != "Suspended" {
		t.Errorf("kubectl get job shows %s for a Job waiting for a worker, want Suspended", got)
	}

	mergePatchJob(ctx, t, d.manager, ns, job.Name, `{"metadata":{"annotations":{"`+v1alpha1.ClusterSelectorAnnotation+`":"`+workerNameLabel+`=`+workerName+`"}}}`)
	running := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running on the worker", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	if c := suspendedCondition(running); c != nil {
		t.Errorf("the running Job still shows %s=%s/%s", c.Type, c.Status, c.Reason)
	}
	if got := kubectlStatus(ctx, t, d.Manager.KubeconfigPath, ns, job.Name); got != "Running" {
		t.Errorf("kubectl get job shows %s for the running Job", got)
	}
	done := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
	rec.close()
	rec.mu.Lock()
	for mirrorUID := range rec.mirrors[done.UID] {
		if diff := cmp.Diff(comparableStatus(rec.lastStatus[mirrorUID]), comparableStatus(done.Status)); diff != "" {
			t.Errorf("the manager's final status differs from the mirror's (-mirror +manager):\n%s", diff)
		}
	}
	rec.mu.Unlock()
	seen := conditions.snapshot()
	t.Logf("condition sequence on the manager: %v", seen)
	// Watched from creation: no conditions, waiting, then only the mirror's
	// (whose intermediate states the copy may or may not catch).
	waitingState := "[Suspended=True/" + policy.ReasonNoWorkerFits + "]"
	if len(seen) < 3 || seen[0] != "[]" || seen[1] != waitingState {
		t.Errorf("the manager Job went through %v, want [] then %s then the mirror's conditions", seen, waitingState)
	}
	for _, s := range seen[min(2, len(seen)):] {
		if strings.Contains(s, "Suspended") {
			t.Errorf("the Suspended condition came back after the Job was dispatched: %v", seen)
		}
	}

	suspended := sleepJob(ns, "suspended-by-user", time.Second)
	suspended.Spec.Suspend = ptr.To(true)
	suspended.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + workerName}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, suspended, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, suspended.Name, 30*time.Second, "Suspended=True/JobSuspended as upstream", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "JobSuspended" && c.Message == "Job suspended"
	})
	if got := kubectlStatus(ctx, t, d.Manager.KubeconfigPath, ns, suspended.Name); got != "Suspended" {
		t.Errorf("kubectl get job shows %s for a suspended Job", got)
	}
	mergePatchJob(ctx, t, d.manager, ns, suspended.Name, `{"spec":{"suspend":false}}`)
	resumed := pollJob(ctx, t, d.manager, ns, suspended.Name, time.Minute, "Complete after resuming", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	if w := resumed.Annotations[v1alpha1.WorkerAnnotation]; w != workerName {
		t.Errorf("ran on %q, want %s", w, workerName)
	}
	d.assertNoRejectedStatusWrites(t)
}

// conditionTrace records the Job's conditions at every change, in order.
type conditionTrace struct {
	mu   sync.Mutex
	seen []string
}

func (c *conditionTrace) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func watchConditions(t *testing.T, d *dispatchEnv, ns, name string) *conditionTrace {
	t.Helper()
	w, err := d.manager.BatchV1().Jobs(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	trace := &conditionTrace{}
	go func() {
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type == watch.Error {
				continue
			}
			var conds []string
			for _, c := range job.Status.Conditions {
				conds = append(conds, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
			}
			s := "[" + strings.Join(conds, " ") + "]"
			trace.mu.Lock()
			if n := len(trace.seen); n == 0 || trace.seen[n-1] != s {
				trace.seen = append(trace.seen, s)
			}
			trace.mu.Unlock()
		}
	}()
	return trace
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
