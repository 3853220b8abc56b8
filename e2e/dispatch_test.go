//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// workerRecorder watches one namespace on every worker and remembers, per
// manager Job UID, every mirror seen, each mirror's last status, and the
// pools its pods were scheduled to — mirrors and pods are deleted with their
// manager Job, so the record is what the test checks afterwards.
type workerRecorder struct {
	mu         sync.Mutex
	mirrors    map[types.UID]map[types.UID]string // origin UID -> mirror UID -> worker
	lastStatus map[types.UID]batchv1.JobStatus    // mirror UID -> last status seen
	podPools   map[string]map[string]bool         // worker/job name -> pools
	nodePool   map[string]map[string]string       // worker -> node -> pool
	stop       chan struct{}
	stopOnce   sync.Once
}

func recordWorkers(ctx context.Context, t *testing.T, d *dispatchEnv, namespace string) *workerRecorder {
	t.Helper()
	r := &workerRecorder{
		mirrors: map[types.UID]map[types.UID]string{}, lastStatus: map[types.UID]batchv1.JobStatus{},
		podPools: map[string]map[string]bool{}, nodePool: map[string]map[string]string{}, stop: make(chan struct{}),
	}
	t.Cleanup(r.close)
	for name, c := range d.workers {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.nodePool[name] = map[string]string{}
		for _, n := range nodes.Items {
			r.nodePool[name][n.Name] = n.Labels[v1alpha1.DefaultPoolLabel]
		}
		factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace))
		onJob := func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			job := obj.(*batchv1.Job)
			origin := types.UID(job.Labels[v1alpha1.OriginUIDLabel])
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.mirrors[origin] == nil {
				r.mirrors[origin] = map[types.UID]string{}
			}
			r.mirrors[origin][job.UID] = name
			r.lastStatus[job.UID] = *job.Status.DeepCopy()
		}
		onPod := func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				return
			}
			key := name + "/" + pod.Labels[batchv1.JobNameLabel]
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.podPools[key] == nil {
				r.podPools[key] = map[string]bool{}
			}
			r.podPools[key][r.nodePool[name][pod.Spec.NodeName]] = true
		}
		if _, err := factory.Batch().V1().Jobs().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) }, DeleteFunc: onJob,
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) },
		}); err != nil {
			t.Fatal(err)
		}
		factory.Start(r.stop)
		factory.WaitForCacheSync(r.stop)
	}
	return r
}

func (r *workerRecorder) close() { r.stopOnce.Do(func() { close(r.stop) }) }

// gpuJob fits only the tainted gpu pool of worker-1.
func gpuJob(namespace, name string) *batchv1.Job {
	job := sleepJob(namespace, name, time.Second)
	spec := &job.Spec.Template.Spec
	spec.NodeSelector = map[string]string{"accelerator": "example-gpu"}
	spec.Tolerations = []corev1.Toleration{{Key: devenv.GPUTaint.Key, Operator: corev1.TolerationOpEqual, Value: devenv.GPUTaint.Value, Effect: devenv.GPUTaint.Effect}}
	spec.Containers[0].Resources.Requests[devenv.GPUResource] = resourceQuantity("1")
	spec.Containers[0].Resources.Limits = corev1.ResourceList{devenv.GPUResource: resourceQuantity("1")}
	return job
}

// comparable is the part of a Job status the manager copy must equal.
type comparable struct {
	Active, Succeeded, Failed       int32
	Ready, Terminating              int32
	CompletedIndexes, FailedIndexes string
	Conditions                      []string
	StartTime, CompletionTime       string
}

func comparableStatus(s batchv1.JobStatus) comparable {
	c := comparable{
		Active: s.Active, Succeeded: s.Succeeded, Failed: s.Failed,
		Ready: ptr.Deref(s.Ready, 0), Terminating: ptr.Deref(s.Terminating, 0),
		CompletedIndexes: s.CompletedIndexes, FailedIndexes: ptr.Deref(s.FailedIndexes, ""),
	}
	for _, cond := range s.Conditions {
		c.Conditions = append(c.Conditions, fmt.Sprintf("%s=%s/%s", cond.Type, cond.Status, cond.Reason))
	}
	if s.StartTime != nil {
		c.StartTime = s.StartTime.UTC().Format(time.RFC3339)
	}
	if s.CompletionTime != nil {
		c.CompletionTime = s.CompletionTime.UTC().Format(time.RFC3339)
	}
	return c
}

// 200 ordinary Jobs — 180 that fit anywhere, 20 that fit only worker-1's
// gpu pool (more than its GPUs at once, so some wait for capacity) — all
// complete on the manager with one mirror each, on a worker that fits, spread
// evenly over the equal general pools, with the manager status equal to the
// mirror's final status.
func TestDispatch200Jobs(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	rec := recordWorkers(ctx, t, d, ns)

	const total, gpuJobs = 200, 20
	start := time.Now()
	for i := range total {
		name := fmt.Sprintf("job-%03d", i)
		job := sleepJob(ns, name, time.Second)
		if i < gpuJobs {
			job = gpuJob(ns, name)
		}
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := waitAllComplete(ctx, t, d, ns, total, 10*time.Minute)
	wall := time.Since(start)
	// Mirrors stay until their manager Job is deleted: delete the Jobs and
	// wait for the mirrors to go, so the recorder has seen every mirror's
	// last state and the clean-up is checked.
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
	rec.close()

	perWorker := map[string]int{}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range jobs {
		job := &jobs[i]
		gpu := job.Spec.Template.Spec.NodeSelector["accelerator"] != ""
		worker := job.Annotations[v1alpha1.WorkerAnnotation]
		mirrors := rec.mirrors[job.UID]
		if len(mirrors) != 1 {
			t.Errorf("%s: %d mirrors seen, want exactly 1: %v", job.Name, len(mirrors), mirrors)
			continue
		}
		for mirrorUID, mirrorWorker := range mirrors {
			if mirrorWorker != worker {
				t.Errorf("%s: mirror on %s, but the manager Job says %s", job.Name, mirrorWorker, worker)
			}
			if diff := cmp.Diff(comparableStatus(rec.lastStatus[mirrorUID]), comparableStatus(job.Status)); diff != "" {
				t.Errorf("%s: manager status differs from the mirror's final status (-mirror +manager):\n%s", job.Name, diff)
			}
		}
		pools := rec.podPools[worker+"/"+job.Name]
		wantPool := "general"
		if gpu {
			wantPool = "gpu"
			if worker != "worker-1" {
				t.Errorf("%s needs the gpu pool but ran on %s", job.Name, worker)
			}
		} else {
			perWorker[worker]++
		}
		if len(pools) != 1 || !pools[wantPool] {
			t.Errorf("%s: pods ran on pools %v of %s, want only %s", job.Name, pools, worker, wantPool)
		}
	}
	general := total - gpuJobs
	for _, w := range []string{"worker-1", "worker-2"} {
		share := float64(perWorker[w]) / float64(general)
		if share < 0.4 || share > 0.6 {
			t.Errorf("%s got %d of the %d general Jobs (%.0f%%), want 40-60%% on equal workers", w, perWorker[w], general, share*100)
		}
	}
	metrics := d.metrics(t)
	dispatch := metrics["jobferry_dispatch_duration_seconds"].Metric[0].GetHistogram()
	lag := metrics["jobferry_status_sync_lag_seconds"].Metric[0].GetHistogram()
	t.Logf("200 Jobs complete on the manager in %s (%.1f Jobs/s); general Jobs per worker %v", wall.Round(100*time.Millisecond), float64(total)/wall.Seconds(), perWorker)
	t.Logf("jobferry_dispatch_duration_seconds p50 %.3fs p99 %.3fs; jobferry_status_sync_lag_seconds p50 %.3fs p99 %.3fs",
		histogramQuantile(0.5, dispatch), histogramQuantile(0.99, dispatch), histogramQuantile(0.5, lag), histogramQuantile(0.99, lag))
	assertDispatchMetrics(t, metrics, total)
	// worker-2 ran its mirrors with the jobferry worker's Job controller.
	workerMetrics := scrapeMetrics(t, d.WorkerMetricsURLs["worker-2"])
	if v := metricSum(workerMetrics["jobferry_build_info"], map[string]string{"component": "worker"}); v != 1 {
		t.Errorf("worker-2's jobferry_build_info{component=worker} = %v, want 1", v)
	}
	if v := metricSum(workerMetrics["jobferry_worker_jobs_finished_total"], map[string]string{"result": "succeeded"}); v < float64(perWorker["worker-2"]) {
		t.Errorf("worker-2's jobferry_worker_jobs_finished_total{result=succeeded} = %v, want at least the %d Jobs that ran there", v, perWorker["worker-2"])
	}
	d.assertNoRejectedStatusWrites(t)
}

// assertDispatchMetrics checks, on the manager's real metrics after a run
// on two connected workers, the metrics that describe the workers.
func assertDispatchMetrics(t *testing.T, metrics map[string]*dto.MetricFamily, mirrors int) {
	t.Helper()
	value := func(name string, labels map[string]string) (float64, bool) {
		return metricSum(metrics[name], labels), metrics[name] != nil
	}
	for _, w := range []string{"worker-1", "worker-2"} {
		if v, ok := value("jobferry_workercluster_connected", map[string]string{"worker": w}); !ok || v != 1 {
			t.Errorf("jobferry_workercluster_connected{worker=%q} = %v (present %v), want 1", w, v, ok)
		}
		if v, ok := value("jobferry_workercluster_pool_allocatable", map[string]string{"worker": w, "pool": "general", "resource": "pods"}); !ok || v <= 0 {
			t.Errorf("jobferry_workercluster_pool_allocatable{worker=%q,pool=general,resource=pods} = %v (present %v), want > 0", w, v, ok)
		}
	}
	created, _ := value("jobferry_workercluster_requests_total", map[string]string{"verb": "POST", "code": "201"})
	if created < float64(mirrors) {
		t.Errorf("jobferry_workercluster_requests_total counts %v POSTs answered 201 on the workers, want at least the %d mirrors created", created, mirrors)
	}
	if v, ok := value("jobferry_build_info", map[string]string{"component": "manager"}); !ok || v != 1 {
		t.Errorf("jobferry_build_info{component=manager} = %v (present %v), want 1", v, ok)
	}
	// One series per reason, at 0 when no Job waits for it.
	reasons := policy.WaitingReasons()
	var have []string
	for _, m := range metrics["jobferry_jobs_waiting"].GetMetric() {
		have = append(have, labelValue(m, "reason"))
	}
	slices.Sort(have)
	slices.Sort(reasons)
	if !slices.Equal(have, reasons) {
		t.Errorf("jobferry_jobs_waiting has series for reasons %v, want %v", have, reasons)
	}
	if v, _ := value("jobferry_jobs_waiting", nil); v != 0 {
		t.Errorf("jobferry_jobs_waiting sums to %v once every Job is Complete, want 0", v)
	}
}

// waitAllComplete waits until the namespace holds total Jobs on the manager,
// all Complete, and returns them.
func waitAllComplete(ctx context.Context, t *testing.T, d *dispatchEnv, ns string, total int, timeout time.Duration) []batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	done := 0
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		jobs, done = list.Items, 0
		for i := range jobs {
			if hasCondition(&jobs[i], batchv1.JobComplete) != nil {
				done++
			}
		}
		return done == total, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Jobs Complete after %s: %v", done, total, timeout, err)
	}
	return jobs
}

// deleteJobsWaitNoMirrors deletes every manager Job of ns, as their user or
// their TTL would, and waits for their mirrors (kept while the manager Job
// exists) to be gone from the workers.
func deleteJobsWaitNoMirrors(ctx context.Context, t *testing.T, d *dispatchEnv, ns string) {
	t.Helper()
	jobs, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs.Items {
		err := d.manager.BatchV1().Jobs(ns).Delete(ctx, jobs.Items[i].Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitNoMirrors(ctx, t, d, ns)
}

func waitNoMirrors(ctx context.Context, t *testing.T, d *dispatchEnv, ns string) {
	t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = nil
		for name, c := range d.workers {
			list, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				left = append(left, fmt.Sprintf("%s/%s (%s, deleting=%v)", name, list.Items[i].Name, describeStatus(&list.Items[i]), list.Items[i].DeletionTimestamp != nil))
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("finished mirrors were not deleted: %v; left: %v", err, left)
	}
}

// dispatchOne creates a Job on the manager and waits until its mirror exists,
// returning the worker and the mirror.
func dispatchOne(ctx context.Context, t *testing.T, d *dispatchEnv, job *batchv1.Job) (string, kubernetes.Interface) {
	t.Helper()
	if _, err := d.manager.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	placed := pollJob(ctx, t, d.manager, job.Namespace, job.Name, time.Minute, "placed", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.WorkerAnnotation] != ""
	})
	worker := placed.Annotations[v1alpha1.WorkerAnnotation]
	return worker, d.workers[worker]
}

// The manager shows a terminating pod (podReplacementPolicy Failed) before
// the worker has created its replacement.
// Run on each worker: kube-controller-manager and the jobferry worker's Job
// controller.
func TestDispatchedJobShowsTerminatingBeforeReplacement(t *testing.T) {
	d := startDispatchEnv(t)
	d.onEachWorker(t, func(t *testing.T, worker string) { showsTerminatingBeforeReplacement(t, d, worker) })
}

func showsTerminatingBeforeReplacement(t *testing.T, d *dispatchEnv, workerName string) {
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "replace-failed", time.Hour)
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	job.Spec.Template.Annotations[terminateDelayAnnotation] = "5s"
	worker := d.dispatchTo(ctx, t, job, workerName)
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "one ready pod on the manager", func(j *batchv1.Job) bool {
		return j.Status.Active == 1 && ptr.Deref(j.Status.Ready, 0) == 1
	})
	pods := jobPods(ctx, t, worker, ns, job.Name)
	if len(pods) != 1 {
		t.Fatalf("want 1 pod on the worker, got %d", len(pods))
	}
	if err := worker.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating := pollJob(ctx, t, d.manager, ns, job.Name, 30*time.Second, "terminating=1 on the manager", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Status.Terminating, 0) == 1
	})
	if now := jobPods(ctx, t, worker, ns, job.Name); len(now) != 1 || now[0].UID != pods[0].UID {
		t.Errorf("when the manager showed terminating=1 the worker had %d pods; want only the deleted one, not yet replaced", len(now))
	}
	if terminating.Status.Active != 0 {
		t.Errorf("manager status while terminating: %s, want active=0", describeStatus(terminating))
	}
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "replacement running, old pod failed", func(j *batchv1.Job) bool {
		return j.Status.Active == 1 && j.Status.Failed == 1 && ptr.Deref(j.Status.Terminating, 0) == 0
	})
	d.assertNoRejectedStatusWrites(t)
}

// An Indexed Job whose index 1 always fails, with backoffLimitPerIndex, ends
// Failed on the manager with failedIndexes and the FailureTarget + Failed
// pair — on each worker, so under both Job controllers.
func TestDispatchedIndexedJobFailsWithFailedIndexes(t *testing.T) {
	d := startDispatchEnv(t)
	d.onEachWorker(t, func(t *testing.T, worker string) { indexedJobFailsWithFailedIndexes(t, d, worker) })
}

func indexedJobFailsWithFailedIndexes(t *testing.T, d *dispatchEnv, workerName string) {
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "per-index", time.Second)
	job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	job.Spec.Completions = ptr.To[int32](3)
	job.Spec.Parallelism = ptr.To[int32](3)
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.Template.Annotations["pod-index-failed.stage.jobferry.dev/index"] = "1"
	d.dispatchTo(ctx, t, job, workerName)
	failed := pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "Failed on the manager", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobFailed) != nil
	})
	if got := ptr.Deref(failed.Status.FailedIndexes, ""); got != "1" {
		t.Errorf("failedIndexes %q, want \"1\"", got)
	}
	if failed.Status.CompletedIndexes != "0,2" {
		t.Errorf("completedIndexes %q, want \"0,2\"", failed.Status.CompletedIndexes)
	}
	if failed.Status.Failed != 2 || failed.Status.Succeeded != 2 {
		t.Errorf("counters %s, want failed=2 succeeded=2", describeStatus(failed))
	}
	target, final := hasCondition(failed, batchv1.JobFailureTarget), hasCondition(failed, batchv1.JobFailed)
	if target == nil || target.Reason != batchv1.JobReasonFailedIndexes || final.Reason != batchv1.JobReasonFailedIndexes {
		t.Errorf("conditions %s, want FailureTarget and Failed with reason %s", describeStatus(failed), batchv1.JobReasonFailedIndexes)
	}
	d.assertNoRejectedStatusWrites(t)
}

// Deleting a running manager Job deletes its mirror and the mirror's pods.
func TestDeletingManagerJobRemovesMirrorAndPods(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "to-delete", time.Hour)
	job.Spec.Parallelism = ptr.To[int32](2)
	_, worker := dispatchOne(ctx, t, d, job)
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "two running pods", func(j *batchv1.Job) bool { return j.Status.Active == 2 })
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		jobs, err := worker.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, managerErr := d.manager.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return len(jobs.Items) == 0 && len(pods.Items) == 0 && managerErr != nil, nil
	})
	if err != nil {
		t.Fatalf("mirror, its pods or the manager Job still there a minute after deletion: %v", err)
	}
}

// A Job on a worker that jobferry did not create is never modified or
// deleted; the manager Job that collides with it is placed elsewhere or, when
// nothing else fits, says why.
func TestSameNamedJobOnWorkerIsLeftAlone(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	// The user's own Job on worker-1, in a namespace of the same name that
	// its administrator made and accepted the manager's Jobs in.
	worker1 := d.workers["worker-1"]
	acceptingNamespace(ctx, t, worker1, ns, managerID(ctx, t, d.managerClient, devenv.SystemNamespace), nil)
	theirs, err := worker1.BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, "clash", time.Hour), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only worker-1 has a gpu pool, so the manager Job can go nowhere else.
	job := gpuJob(ns, "clash")
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := d.manager.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		conflict, unschedulable := false, false
		for _, e := range events.Items {
			conflict = conflict || e.Reason == "NameConflict"
			unschedulable = unschedulable || (e.Reason == "Unschedulable" && strings.Contains(e.Message, "not created by jobferry exists there"))
		}
		return conflict && unschedulable, nil
	})
	if err != nil {
		t.Fatalf("no NameConflict and Unschedulable events explaining the clash: %v", err)
	}
	now, err := worker1.BatchV1().Jobs(ns).Get(ctx, "clash", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the user's Job on the worker is gone: %v", err)
	}
	if now.UID != theirs.UID || now.Generation != theirs.Generation || !equalLabels(now.Labels, theirs.Labels) || now.DeletionTimestamp != nil {
		t.Errorf("the user's Job on the worker was modified: generation %d->%d, labels %v->%v, deleting %v",
			theirs.Generation, now.Generation, theirs.Labels, now.Labels, now.DeletionTimestamp != nil)
	}
	managerJob, err := d.manager.BatchV1().Jobs(ns).Get(ctx, "clash", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := managerJob.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		t.Errorf("the manager Job is still placed on %q", w)
	}
	if !slices.Contains(strings.Split(managerJob.Annotations[v1alpha1.ExcludedWorkersAnnotation], ","), "worker-1") {
		t.Errorf("worker-1 is not excluded: %v", managerJob.Annotations)
	}
	// Clean up: the manager Job is unplaced, so deleting it touches no worker.
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, "clash", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func equalLabels(a, b map[string]string) bool { return cmp.Equal(a, b) }

// The manager Job's own ttlSecondsAfterFinished still works: the manager
// cluster's TTL controller deletes it once finished (jobferry holds no
// finalizer on it), and its mirror, kept until then, goes with it.
func TestManagerJobTTLAfterFinished(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "short-lived", time.Second)
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
	_, worker := dispatchOne(ctx, t, d, job)
	mirrors, err := worker.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err == nil && len(mirrors.Items) == 1 && mirrors.Items[0].Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("the mirror carries ttlSecondsAfterFinished=%d; the worker could delete it before its final status is copied", *mirrors.Items[0].Spec.TTLSecondsAfterFinished)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.manager.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the finished manager Job was not deleted by its TTL: %v", err)
	}
	waitNoMirrors(ctx, t, d, ns)
	d.assertNoRejectedStatusWrites(t)
}
