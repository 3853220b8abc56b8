//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// kueueEnv is a dispatch environment whose manager cluster runs Kueue, with
// a client that knows Kueue's API and jobferry's check "jobferry" Active.
type kueueEnv struct {
	*dispatchEnv
	queues
}

// startKueueEnv starts two workers of one general pool (16 CPUs) each,
// Kueue (with opts) and the manager with --kueue, and jobferry's check
// (newQueues).
func startKueueEnv(ctx context.Context, t *testing.T, opts localcluster.KueueOptions) *kueueEnv {
	t.Helper()
	d := startOwnDispatchEnv(ctx, t, devenv.Options{
		Dir: outputDir(t), Kueue: &opts,
		Workers: []localcluster.Spec{
			{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(1)}},
			{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(1)}},
		},
		// The manager logs each step (level 2): the Kueue tests' logs say
		// what it decided at each turn of Kueue's.
		ManagerArgs: []string{"--worker-health-interval=2s", "--worker-lost-timeout=8s", "--zap-log-level=2", "--kueue-require-queue-name"},
	})
	return &kueueEnv{dispatchEnv: d, queues: newQueues(ctx, t, d.Manager.RESTConfig())}
}

// queues is a client of the manager cluster that knows Kueue's API.
type queues struct {
	c client.Client
}

// newQueues makes what every ClusterQueue of these tests uses, as an
// administrator would: the ResourceFlavor "workers" and the check
// "jobferry", waiting until it is Active (devenv.SetUpKueueCheck).
func newQueues(ctx context.Context, t *testing.T, cfg *rest.Config) queues {
	t.Helper()
	c, err := devenv.NewKueueClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := devenv.SetUpKueueCheck(ctx, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	return queues{c: c}
}

func (q queues) create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := q.c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// clusterQueue makes a ClusterQueue of cpuQuota CPUs of the flavor
// "workers", for every namespace, using jobferry's check, as mutate says.
func (q queues) clusterQueue(ctx context.Context, t *testing.T, name, cpuQuota string, mutate ...func(*kueue.ClusterQueueSpec)) {
	t.Helper()
	cq := devenv.KueueClusterQueue(name, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuQuota)})
	for _, m := range mutate {
		m(&cq.Spec)
	}
	q.create(ctx, t, cq)
}

// localQueue makes the LocalQueue name of the ClusterQueue cq in namespace
// ns.
func (q queues) localQueue(ctx context.Context, t *testing.T, ns, name, cq string) {
	t.Helper()
	q.create(ctx, t, devenv.KueueLocalQueue(ns, name, cq))
}

// checkKueueMode runs one queued Job through Kueue and jobferry in the
// opted-in namespace ns of a manager cluster (cfg, admin) where both run:
// for the install test, whose audit then sees the Kueue rules used.
func checkKueueMode(ctx context.Context, t *testing.T, cfg *rest.Config, admin kubernetes.Interface, ns string) {
	q := newQueues(ctx, t, cfg)
	q.clusterQueue(ctx, t, "tenants", "4")
	q.localQueue(ctx, t, ns, "team", "tenants")
	job, err := admin.BatchV1().Jobs(ns).Create(ctx, queuedJob(ns, "team", "queued", time.Second, "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := pollJob(ctx, t, admin, ns, job.Name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	wl := q.workload(ctx, t, job, "finished", func(w *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
	})
	if c := check(wl); c.State != kueue.CheckStateReady || done.Annotations[v1alpha1.WorkerAnnotation] == "" {
		t.Errorf("jobferry's check %s (%s) on a Job placed on %q, want Ready on a placed Job", c.State, c.Message, done.Annotations[v1alpha1.WorkerAnnotation])
	}
	// Two workers of two 16-CPU nodes each.
	q.markQuotaFromCapacity(ctx, t, "tenants")
	q.waitQuota(ctx, t, "tenants", "64", "the workers' capacity")
}

// queuedJob is a sleep Job in the LocalQueue queueName asking cpu for its
// pod.
func queuedJob(namespace, queueName, name string, runFor time.Duration, cpu string) *batchv1.Job {
	job := sleepJob(namespace, name, runFor)
	job.Labels = map[string]string{workload.NameLabel: queueName}
	job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	return job
}

// workload polls the Workload of the Job until done holds.
func (k queues) workload(ctx context.Context, t *testing.T, job *batchv1.Job, what string, done func(*kueue.Workload) bool) *kueue.Workload {
	t.Helper()
	var last *kueue.Workload
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list kueue.WorkloadList
		if err := k.c.List(ctx, &list, client.InNamespace(job.Namespace)); err != nil {
			return false, err
		}
		for i := range list.Items {
			if owner := metav1.GetControllerOf(&list.Items[i]); owner != nil && owner.UID == job.UID {
				last = &list.Items[i]
				return done(last), nil
			}
		}
		return false, nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("waiting for the Workload of Job %s to be %s: %v; last seen %+v", job.Name, what, err, status)
	}
	return last
}

// check is jobferry's check on the Workload ("jobferry").
func check(wl *kueue.Workload) kueue.AdmissionCheckState {
	for _, c := range wl.Status.AdmissionChecks {
		if c.Name == devenv.KueueCheck {
			return c
		}
	}
	return kueue.AdmissionCheckState{}
}

// With Kueue on the manager, Kueue decides when and jobferry where: a
// queued Job waits for quota, jobferry places it and sets its check Ready
// with the placement as pod set updates (which Kueue injects as it admits
// and unsuspends the Job), and the mirror runs it to completion; a Job no
// worker could ever run gets the check Rejected and gives its quota back; a
// Job Kueue evicts while it runs has its mirror suspended and drained, its
// placement let go, and runs again (a new attempt) once Kueue admits it
// again — never twice at once.
func TestKueueQueuesJobferryPlaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	k := startKueueEnv(ctx, t, localcluster.KueueOptions{})
	k.clusterQueue(ctx, t, "tenants", "24")
	ns := k.optedInNamespace(ctx, t)
	k.localQueue(ctx, t, ns, "team", "tenants")

	t.Run("admitted where jobferry places it", func(t *testing.T) {
		job := queuedJob(ns, "team", "queued", 2*time.Second, "1")
		created, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done := pollJob(ctx, t, k.manager, ns, job.Name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
		worker := done.Annotations[v1alpha1.WorkerAnnotation]
		if worker == "" {
			t.Fatal("the completed Job records no placement")
		}
		if got := done.Spec.Template.Annotations[v1alpha1.WorkerAnnotation]; got != worker {
			t.Errorf("Kueue injected pod set update %s=%q into the template, want the placement %q", v1alpha1.WorkerAnnotation, got, worker)
		}
		wl := k.workload(ctx, t, created, "finished", func(w *kueue.Workload) bool {
			return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
		})
		c := check(wl)
		if c.State != kueue.CheckStateReady || len(c.PodSetUpdates) != 1 || c.PodSetUpdates[0].Annotations[v1alpha1.WorkerAnnotation] != worker {
			t.Errorf("jobferry's check %+v, want Ready with the placement on %s", c, worker)
		}
		mirror, err := k.workers[worker].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the mirror on %s: %v", worker, err)
		}
		if _, ok := mirror.Labels[workload.NameLabel]; ok {
			t.Errorf("the mirror carries the queue label %s: a Kueue on the worker would queue it again", workload.NameLabel)
		}
		// The Dispatched Event says why there, as for a Job Kueue does not
		// queue, though the placement was made before Kueue admitted it.
		if !strings.HasPrefix(c.Message, "placed on "+worker+": ") {
			t.Errorf("jobferry's Ready check says %q, want the placement's reasons (placed on %s: ...)", c.Message, worker)
		}
		events, err := k.manager.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job.Name + ",reason=" + policy.ReasonDispatched})
		if err != nil {
			t.Fatal(err)
		}
		if len(events.Items) != 1 || !strings.HasPrefix(events.Items[0].Message, c.Message+"; created its mirror there") {
			var messages []string
			for _, e := range events.Items {
				messages = append(messages, e.Message)
			}
			t.Errorf("%s Events %q, want one that starts with the placement's reasons %q", policy.ReasonDispatched, messages, c.Message)
		}
		t.Logf("%s: quota reserved, placed on %s (%s), admitted, complete; Workload finished", job.Name, worker, c.Message)
	})

	t.Run("rejected when no worker could ever run it", func(t *testing.T) {
		// 20 CPUs at once: within the quota, beyond any pool (16 each).
		job := queuedJob(ns, "team", "too-big", time.Second, "20")
		created, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Kueue deactivates a Workload a check rejected (and resets the
		// check to Pending): the Job says why.
		wl := k.workload(ctx, t, created, "deactivated, holding no quota", func(w *kueue.Workload) bool {
			return !ptr.Deref(w.Spec.Active, true) && !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved)
		})
		if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c == nil || !strings.Contains(c.Message, "jobferry, were rejected") {
			t.Errorf("the Workload's Evicted condition %+v does not name jobferry's check", c)
		}
		waiting := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "saying no worker can run it", func(j *batchv1.Job) bool {
			c := hasCondition(j, batchv1.JobSuspended)
			return c != nil && c.Reason == policy.ReasonNoWorkerCanRun && strings.Contains(c.Message, "needs 20 cpu at once")
		})
		if w := waiting.Annotations[v1alpha1.WorkerAnnotation]; w != "" || !ptr.Deref(waiting.Spec.Suspend, false) {
			t.Errorf("a rejected Job is placed on %q or not suspended (%v)", w, waiting.Spec.Suspend)
		}
		t.Logf("%s: %s", job.Name, hasCondition(waiting, batchv1.JobSuspended).Message)
	})

	t.Run("evicted while running: drained, requeued, placed afresh", func(t *testing.T) {
		job := queuedJob(ns, "team", "evicted", 15*time.Second, "1")
		created, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		running := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		first := running.Annotations[v1alpha1.WorkerAnnotation]
		// Deactivating the Workload makes Kueue evict it, as preemption does.
		wl := k.workload(ctx, t, created, "admitted", func(w *kueue.Workload) bool {
			return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted)
		})
		wl.Spec.Active = ptr.To(false)
		if err := k.c.Update(ctx, wl); err != nil {
			t.Fatal(err)
		}
		requeued := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "suspended, drained and unplaced", func(j *batchv1.Job) bool {
			return ptr.Deref(j.Spec.Suspend, false) && j.Status.Active == 0 && j.Annotations[v1alpha1.WorkerAnnotation] == ""
		})
		if _, err := k.workers[first].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("the drained mirror on %s is still there after the placement went", first)
		}
		wl = k.workload(ctx, t, created, "evicted", func(w *kueue.Workload) bool {
			return !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadQuotaReserved)
		})
		wl.Spec.Active = ptr.To(true)
		if err := k.c.Update(ctx, wl); err != nil {
			t.Fatal(err)
		}
		done := pollJob(ctx, t, k.manager, ns, job.Name, 2*time.Minute, "Complete after readmission", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
		if got := done.Annotations[v1alpha1.DispatchAttemptAnnotation]; got != "2" {
			t.Errorf("dispatch attempt %q after the eviction, want 2", got)
		}
		t.Logf("%s: ran on %s, evicted (requeued at %s), ran again on %s as attempt 2, complete",
			job.Name, first, requeued.Status.Conditions, done.Annotations[v1alpha1.WorkerAnnotation])
	})

	t.Run("worker lost while running: Retry, placed elsewhere, the stale mirror fenced", func(t *testing.T) {
		job := queuedJob(ns, "team", "lost", 20*time.Second, "1")
		created, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		running := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		lost := running.Annotations[v1alpha1.WorkerAnnotation]
		var cluster *localcluster.Cluster
		for _, w := range k.Workers {
			if w.Name == lost {
				cluster = w
			}
		}
		restart := stopComponent(t, cluster, "kube-apiserver")
		done := pollJob(ctx, t, k.manager, ns, job.Name, 3*time.Minute, "Complete elsewhere", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
		if w, attempt := done.Annotations[v1alpha1.WorkerAnnotation], done.Annotations[v1alpha1.DispatchAttemptAnnotation]; w == lost || attempt != "2" || done.Status.Succeeded != 1 {
			t.Errorf("completed on %s as attempt %s with succeeded=%d, want attempt 2 on the other worker than %s, succeeded once", w, attempt, done.Status.Succeeded, lost)
		}
		wl := k.workload(ctx, t, created, "finished", func(w *kueue.Workload) bool {
			return meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
		})
		if c := check(wl); ptr.Deref(c.RetryCount, 0) < 1 {
			t.Errorf("jobferry's check %+v was never Retry", c)
		}
		restart()
		waitConnected(ctx, t, k.dispatchEnv, lost, metav1.ConditionTrue)
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := k.workers[lost].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("the stale mirror on %s is still there after it came back: %v", lost, err)
		}
		t.Logf("%s: running on %s, lost; check Retry (retryCount %d), requeued, attempt 2 complete on %s; the stale mirror fenced once %s was back",
			job.Name, lost, ptr.Deref(check(wl).RetryCount, 0), done.Annotations[v1alpha1.WorkerAnnotation], lost)
	})

	t.Run("a Job naming no LocalQueue is refused", func(t *testing.T) {
		_, err := k.manager.BatchV1().Jobs(ns).Create(ctx, dispatched(sleepJob(ns, "unqueued", time.Second)), metav1.CreateOptions{})
		if err == nil || !containsAll(err.Error(), "queue name", "this Job names no LocalQueue: set its label kueue.x-k8s.io/queue-name") {
			t.Fatalf("creating a Job naming no LocalQueue: %v; want it refused naming the label", err)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("a waiting Job's queue label removed: never dispatched outside Kueue", func(t *testing.T) {
		// A ClusterQueue of no quota: its Jobs wait.
		k.clusterQueue(ctx, t, "empty", "0")
		k.localQueue(ctx, t, ns, "waiting", "empty")
		job := queuedJob(ns, "waiting", "unlabelled", time.Second, "1")
		if _, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "recorded as queued", func(j *batchv1.Job) bool {
			return j.Annotations[v1alpha1.QueuedAnnotation] == "waiting"
		})
		patch := []byte(`{"metadata":{"labels":{"` + workload.NameLabel + `":null}}}`)
		if _, err := k.manager.BatchV1().Jobs(ns).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the queue label: %v", err)
		}
		waiting := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "waiting for its queue label", func(j *batchv1.Job) bool {
			c := hasCondition(j, batchv1.JobSuspended)
			return c != nil && c.Reason == policy.ReasonQueueLabelRemoved
		})
		if w := waiting.Annotations[v1alpha1.WorkerAnnotation]; w != "" || !ptr.Deref(waiting.Spec.Suspend, false) {
			t.Errorf("the Job whose label was removed is placed on %q or unsuspended (%v)", w, waiting.Spec.Suspend)
		}
		for name, w := range k.workers {
			if _, err := w.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
				t.Errorf("a mirror of %s exists on %s", job.Name, name)
			}
		}
		t.Logf("%s: %s", job.Name, hasCondition(waiting, batchv1.JobSuspended).Message)
	})

	t.Run("a placed Job unsuspended by its tenant before Kueue admits it: no mirror", func(t *testing.T) {
		// A second admission check that stays Pending (its controller,
		// played here, is Active but never decides): jobferry places the
		// Job and says Ready, and Kueue does not admit it.
		held := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Spec: kueue.AdmissionCheckSpec{ControllerName: "example.com/held"}}
		k.create(ctx, t, held)
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k.c.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
				return err
			}
			meta.SetStatusCondition(&held.Status.Conditions, metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "played by the test"})
			return k.c.Status().Update(ctx, held)
		}); err != nil {
			t.Fatal(err)
		}
		k.clusterQueue(ctx, t, "held", "4", func(spec *kueue.ClusterQueueSpec) {
			spec.AdmissionChecksStrategy.AdmissionChecks = append(spec.AdmissionChecksStrategy.AdmissionChecks, kueue.AdmissionCheckStrategyRule{Name: "held"})
		})
		k.localQueue(ctx, t, ns, "held", "held")
		job := queuedJob(ns, "held", "unsuspended", time.Second, "1")
		created, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k.workload(ctx, t, created, "jobferry's check Ready, not admitted", func(w *kueue.Workload) bool {
			return check(w).State == kueue.CheckStateReady && !meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted)
		})
		placed := pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "placed", func(j *batchv1.Job) bool { return j.Annotations[v1alpha1.WorkerAnnotation] != "" })
		worker := placed.Annotations[v1alpha1.WorkerAnnotation]
		if _, err := k.manager.BatchV1().Jobs(ns).Patch(ctx, job.Name, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("unsuspending the Job: %v", err)
		}
		// Kueue suspends it again (not admitted); meanwhile and after, no
		// mirror.
		pollJob(ctx, t, k.manager, ns, job.Name, time.Minute, "suspended again by Kueue", func(j *batchv1.Job) bool {
			return ptr.Deref(j.Spec.Suspend, false) && j.Generation >= placed.Generation+2
		})
		if _, err := k.workers[worker].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a mirror of the Job Kueue has not admitted exists on %s (%v)", worker, err)
		}
		if err := k.manager.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("quota follows capacity: a cordon takes a worker's CPUs out, an uncordon puts them back", func(t *testing.T) {
		k.markQuotaFromCapacity(ctx, t, "tenants")
		k.waitQuota(ctx, t, "tenants", "32", "both workers' 16 CPUs")
		setCordoned(ctx, t, k.managerClient, "worker-1", true)
		k.waitQuota(ctx, t, "tenants", "16", "worker-2's alone, worker-1 cordoned")
		setCordoned(ctx, t, k.managerClient, "worker-1", false)
		k.waitQuota(ctx, t, "tenants", "32", "both again, worker-1 uncordoned")
	})

	k.assertNoRejectedStatusWrites(t)
}

// markQuotaFromCapacity has jobferry keep the ClusterQueue's quota of the
// flavor "workers" equal to the eligible workers' capacity.
func (q queues) markQuotaFromCapacity(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.QuotaFromCapacityAnnotation + `":"` + devenv.KueueFlavor + `"}}}`)
	if err := q.c.Patch(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// waitQuota waits until the ClusterQueue's nominal CPU quota of the flavor
// "workers" is cpu.
func (q queues) waitQuota(ctx context.Context, t *testing.T, name, cpu, what string) {
	t.Helper()
	start, last := time.Now(), ""
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var cq kueue.ClusterQueue
		if err := q.c.Get(ctx, client.ObjectKey{Name: name}, &cq); err != nil {
			return false, err
		}
		last = cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.String()
		return last == cpu, nil
	})
	if err != nil {
		t.Fatalf("ClusterQueue %s's CPU quota %s, want %s (%s): %v", name, last, cpu, what, err)
	}
	t.Logf("ClusterQueue %s: CPU quota %s (%s) after %s", name, cpu, what, time.Since(start).Round(100*time.Millisecond))
}

// explainUnfinished logs, for each Job of ns not Complete, what the
// manager, Kueue and the workers hold of it, and the manager's log lines
// naming it: a wait that timed out says where each Job stopped.
func (k *kueueEnv) explainUnfinished(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	jobs, err := k.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing the Jobs of %s: %v", ns, err)
		return
	}
	var workloads kueue.WorkloadList
	if err := k.c.List(ctx, &workloads, client.InNamespace(ns)); err != nil {
		t.Logf("listing the Workloads of %s: %v", ns, err)
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if hasCondition(job, batchv1.JobComplete) != nil {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "unfinished Job %s: suspend=%v active=%d ready=%d succeeded=%d conditions=%s",
			job.Name, ptr.Deref(job.Spec.Suspend, false), job.Status.Active, ptr.Deref(job.Status.Ready, 0), job.Status.Succeeded, conditionSummary(job.Status.Conditions))
		for key, v := range job.Annotations {
			if strings.HasPrefix(key, "jobferry.dev/") && key != v1alpha1.StateSealAnnotation && key != v1alpha1.UserSchedulingAnnotation {
				fmt.Fprintf(&b, "\n  %s=%s", key, v)
			}
		}
		for j := range workloads.Items {
			wl := &workloads.Items[j]
			if owner := metav1.GetControllerOf(wl); owner == nil || owner.UID != job.UID {
				continue
			}
			fmt.Fprintf(&b, "\n  Workload %s active=%v", wl.Name, ptr.Deref(wl.Spec.Active, true))
			for _, c := range wl.Status.Conditions {
				fmt.Fprintf(&b, "\n    %s=%s/%s at %s: %s", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format(time.RFC3339), c.Message)
			}
			for _, c := range wl.Status.AdmissionChecks {
				fmt.Fprintf(&b, "\n    check %s %s at %s: %s", c.Name, c.State, c.LastTransitionTime.Format(time.RFC3339), c.Message)
			}
			if rs := wl.Status.RequeueState; rs != nil {
				fmt.Fprintf(&b, "\n    requeueState count=%v at=%v", ptr.Deref(rs.Count, 0), rs.RequeueAt)
			}
		}
		for name, w := range k.workers {
			m, err := w.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				fmt.Fprintf(&b, "\n  on %s: %v", name, err)
			default:
				fmt.Fprintf(&b, "\n  mirror on %s: suspend=%v active=%d ready=%d succeeded=%d conditions=%s",
					name, ptr.Deref(m.Spec.Suspend, false), m.Status.Active, ptr.Deref(m.Status.Ready, 0), m.Status.Succeeded, conditionSummary(m.Status.Conditions))
			}
		}
		fmt.Fprintf(&b, "\n  the manager's log lines naming it:\n%s", grepLog(k.ManagerProcess.Log, `"`+job.Name+`"`, 40))
		t.Log(b.String())
	}
}

// conditionSummary is conditions as Type=Status/Reason.
func conditionSummary(conditions []batchv1.JobCondition) string {
	var parts []string
	for _, c := range conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// grepLog is the last n lines of the log file at path containing s.
func grepLog(path, s string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, s) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
