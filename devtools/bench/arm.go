package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// role is what a watched cluster's Jobs are to an arm.
type role int

const (
	// submitted: the Jobs the bench created (on the workers in the direct
	// arm, on the manager in the jobferry arm).
	submitted role = iota
	// mirrors: the workers' copies of the manager Jobs (jobferry and Kueue
	// arms).
	mirrors
)

// observer records, per Job name, what the watches of one namespace on
// several clusters saw and when.
type observer struct {
	mu   sync.Mutex
	jobs map[string]*jobTimes
	// completed and failed count the submitted Jobs seen finished, running
	// those seen running (active pods) at least once.
	completed, failed, running int
	// created counts the Jobs whose create request was sent.
	created      int
	firstFailure string
	// placedOn counts the mirrors seen on each worker, runningOn those
	// running there now and peakOn the most at once (placement.go).
	placedOn, runningOn, peakOn map[string]int
}

func newObserver() *observer {
	return &observer{jobs: map[string]*jobTimes{}, placedOn: map[string]int{}, runningOn: map[string]int{}, peakOn: map[string]int{}}
}

func (o *observer) entry(name string) *jobTimes {
	j := o.jobs[name]
	if j == nil {
		j = &jobTimes{}
		o.jobs[name] = j
	}
	return j
}

// creating notes the moment just before a Job's create request, so no watch
// event can come before it.
func (o *observer) creating(name string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.entry(name).created = at
	o.created++
}

// waitCreated returns once n Jobs are being created.
func (o *observer) waitCreated(ctx context.Context, n int) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.created >= n, nil
	})
}

// seen notes what a watch of cluster saw of a Job at a moment.
func (o *observer) seen(r role, cluster string, job *batchv1.Job, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	j := o.entry(job.Name)
	complete := jobstatus.ConditionTrue(job.Status, batchv1.JobComplete)
	if ptr.Deref(job.Status.Ready, 0) > 0 && j.runningSeen.IsZero() {
		// The Job's pod runs, seen on the Job or on its copy on a worker:
		// a dispatcher whose copy of the running status lags (or skips
		// it) is timed by its work, not by its copy.
		j.runningSeen = at
	}
	switch r {
	case mirrors:
		if j.mirrorSeen.IsZero() {
			j.mirrorSeen = at
			o.placedOn[cluster]++
		}
		// A mirror runs from its first active pod until it finishes; one
		// made again elsewhere counts where it is.
		running := job.Status.Active > 0 && !jobstatus.Finished(job.Status)
		switch {
		case running && j.mirrorRunningOn == "":
			j.mirrorRunningOn = cluster
			o.runningOn[cluster]++
			o.peakOn[cluster] = max(o.peakOn[cluster], o.runningOn[cluster])
		case !running && j.mirrorRunningOn == cluster:
			j.mirrorRunningOn = ""
			o.runningOn[cluster]--
		}
		if complete && j.mirrorComplete.IsZero() {
			j.mirrorComplete = at
		}
	case submitted:
		if worker := job.Annotations[v1alpha1.WorkerAnnotation]; j.placed.IsZero() && worker != "" {
			j.placed, j.placedOn = at, worker
		}
		if j.admitted.IsZero() && !ptr.Deref(job.Spec.Suspend, false) {
			j.admitted = at
		}
		if !j.running && job.Status.Active > 0 {
			j.running = true
			o.running++
		}
		if complete && j.complete.IsZero() {
			j.complete = at
			o.completed++
		}
		if jobstatus.ConditionTrue(job.Status, batchv1.JobFailed) && !j.failed {
			j.failed = true
			o.failed++
			if o.firstFailure == "" {
				o.firstFailure = job.Name
			}
		}
	}
}

// quotaReserved notes when Kueue was first seen to have reserved quota for
// the Workload of the Job named job (Kueue arm).
func (o *observer) quotaReserved(job string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if j := o.entry(job); j.quotaReserved.IsZero() {
		j.quotaReserved = at
	}
}

// placement is the spread of the mirrors over the workers, each of which
// holds room Jobs at once.
func (o *observer) placement(room map[string]int) Placement {
	o.mu.Lock()
	defer o.mu.Unlock()
	return placementOf(room, o.placedOn, o.peakOn)
}

// firstCompleteAfter is the earliest a submitted Job was seen Complete at
// or after t, false when none was.
func (o *observer) firstCompleteAfter(t time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var first time.Time
	for _, j := range o.jobs {
		if !j.complete.IsZero() && !j.complete.Before(t) && (first.IsZero() || j.complete.Before(first)) {
			first = j.complete
		}
	}
	return first, !first.IsZero()
}

// lagSince is the status-copy lag (the mirror's Complete seen until the
// manager Job's) of the Jobs whose mirror was seen Complete at or after t.
func (o *observer) lagSince(t time.Time) Percentiles {
	o.mu.Lock()
	defer o.mu.Unlock()
	var lag []time.Duration
	for _, j := range o.jobs {
		if !j.mirrorComplete.IsZero() && !j.complete.IsZero() && !j.mirrorComplete.Before(t) {
			lag = append(lag, nonNegative(j.complete.Sub(j.mirrorComplete)))
		}
	}
	return percentiles(lag)
}

// runningCount is how many submitted Jobs were seen running.
func (o *observer) runningCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running
}

func (o *observer) progress() (completed, failed int, firstFailure string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.completed, o.failed, o.firstFailure
}

func (o *observer) timings() timings {
	o.mu.Lock()
	defer o.mu.Unlock()
	return summarise(o.jobs)
}

// watchJobs runs an informer on the Jobs of namespace ns until ctx ends,
// reporting every added or updated Job to the observer.
func watchJobs(ctx context.Context, c kubernetes.Interface, cluster, ns string, r role, o *observer) error {
	return inform(ctx, "Jobs in "+ns, toolscache.NewListWatchFromClient(c.BatchV1().RESTClient(), "jobs", ns, fields.Everything()), &batchv1.Job{}, func(obj any) {
		if job, ok := obj.(*batchv1.Job); ok {
			o.seen(r, cluster, job, time.Now())
		}
	})
}

// watchWorkloads runs an informer on the Kueue Workloads of namespace ns
// until ctx ends, reporting to the observer when each Job's Workload has
// quota reserved.
func watchWorkloads(ctx context.Context, c kueueclient.Interface, ns string, o *observer) error {
	return inform(ctx, "Workloads in "+ns, toolscache.NewListWatchFromClient(c.KueueV1beta2().RESTClient(), "workloads", ns, fields.Everything()), &kueue.Workload{}, func(obj any) {
		wl, ok := obj.(*kueue.Workload)
		if !ok || !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
			return
		}
		if owner := metav1.GetControllerOf(wl); owner != nil && owner.Kind == "Job" {
			o.quotaReserved(owner.Name, time.Now())
		}
	})
}

// inform runs an informer of objType from lw (what it watches) until ctx
// ends, calling handle with every object added or updated, and returns once
// it has synced.
func inform(ctx context.Context, what string, lw toolscache.ListerWatcher, objType runtime.Object, handle func(obj any)) error {
	_, controller := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    objType,
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, obj any) { handle(obj) },
		},
	})
	go controller.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
		return fmt.Errorf("watching %s: %w", what, ctx.Err())
	}
	return nil
}

// benchRequests is what a bench Job's pod asks for: what a small real pod
// would.
func benchRequests() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}
}

// ampleQuota is quota for n bench Jobs at once: Kueue never holds one back
// for want of quota.
func ampleQuota(n int) corev1.ResourceList {
	quota := corev1.ResourceList{}
	for r, q := range benchRequests() {
		total := q.DeepCopy()
		total.Mul(int64(n))
		quota[r] = total
	}
	return quota
}

// jobShape changes a bench Job for an arm before it is created (nil: as
// benchJob makes it).
type jobShape func(*batchv1.Job)

// queuedIn queues a Job in the LocalQueue named queue.
func queuedIn(queue string) jobShape {
	return func(job *batchv1.Job) { job.Labels = map[string]string{workload.NameLabel: queue} }
}

// benchJob is the Job every arm runs: one pod that KWOK completes a second
// after it starts, requesting benchRequests.
func benchJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Completions:  ptr.To[int32](1),
			Parallelism:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "work", Image: "registry.example/bench:1",
						Resources: corev1.ResourceRequirements{Requests: benchRequests()},
					}},
				},
			},
		},
	}
}

// createJobs creates n Jobs named bench-00000... in ns of the arm's shape,
// the i-th through targets[i % len(targets)], from concurrency goroutines,
// or one every interval when it is set, timing each.
func createJobs(ctx context.Context, targets []kubernetes.Interface, ns string, shape jobShape, n, concurrency int, interval time.Duration, o *observer) error {
	create := func(i int) error {
		job := benchJob(ns, fmt.Sprintf("bench-%05d", i))
		if shape != nil {
			shape(job)
		}
		o.creating(job.Name, time.Now())
		if _, err := targets[i%len(targets)].BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Job %s/%s: %w", ns, job.Name, err)
		}
		return nil
	}
	if interval <= 0 {
		return parallel(n, concurrency, create)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		if err := create(i); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// deleteJobs deletes every Job of ns on the targets one by one, as their
// user or their ttlSecondsAfterFinished would, their pods with them.
func deleteJobs(ctx context.Context, targets []kubernetes.Interface, ns string, concurrency int) error {
	type job struct {
		c    kubernetes.Interface
		name string
	}
	var jobs []job
	for _, c := range targets {
		list, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the Jobs of %s: %w", ns, err)
		}
		for i := range list.Items {
			jobs = append(jobs, job{c, list.Items[i].Name})
		}
	}
	return parallel(len(jobs), concurrency, func(i int) error {
		err := jobs[i].c.BatchV1().Jobs(ns).Delete(ctx, jobs[i].name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Job %s/%s: %w", ns, jobs[i].name, err)
		}
		return nil
	})
}

// parallel calls do for 0..n-1 from concurrency goroutines, stopping at the
// first error, which it returns.
func parallel(n, concurrency int, do func(i int) error) error {
	items := make(chan int)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range items {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case items <- i:
		case err = <-errs:
			break feed
		}
	}
	close(items)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs // nil once closed and empty
}

// waitComplete polls the observer until all n Jobs are Complete, failing on
// the first failed Job or at the timeout, and prints progress.
func waitComplete(ctx context.Context, o *observer, n int, timeout time.Duration, what string, progress io.Writer) error {
	lastReport := time.Now()
	var completed int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		c, failed, firstFailure := o.progress()
		completed = c
		if failed > 0 {
			return false, fmt.Errorf("%s: %d Job(s) failed (first: %s)", what, failed, firstFailure)
		}
		if time.Since(lastReport) >= 10*time.Second {
			fmt.Fprintf(progress, "%s: %d/%d Complete\n", what, completed, n)
			lastReport = time.Now()
		}
		return completed >= n, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s: only %d of %d Jobs Complete after %s: %w", what, completed, n, timeout, errUnfinished)
	}
	return err
}

// errUnfinished: an arm's time ran out before every Job completed.
var errUnfinished = errors.New("the arm's time ran out")

// waitRunning waits until every one of the n Jobs was seen running (the
// simulator holds them running).
func waitRunning(ctx context.Context, o *observer, n int, timeout time.Duration, what string, progress io.Writer) error {
	lastReport := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		running := o.runningCount()
		if time.Since(lastReport) >= 10*time.Second {
			fmt.Fprintf(progress, "%s: %d/%d running\n", what, running, n)
			lastReport = time.Now()
		}
		return running >= n, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s: only %d of %d Jobs running after %s", what, o.runningCount(), n, timeout)
	}
	return err
}
