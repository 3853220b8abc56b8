package jobcontroller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// syncBatchPeriod gathers the pod events of a Job into one sync, as the
// upstream controller does; spec changes sync at once.
const syncBatchPeriod = time.Second

// controllerUIDField indexes pods by the UID of their controlling owner.
const controllerUIDField = ".metadata.controllerUID"

// The rights the Job controller needs, for the worker chart (hack/generate.sh
// writes them with controller-gen into charts/jobferry-worker/files/). Pods
// it creates name their Job as owner with blockOwnerDeletion, which clusters
// enforcing owner references check against jobs/finalizers.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;update

// Reconciler runs the Jobs this controller manages. Create it with its
// exported fields and call SetupWithManager.
type Reconciler struct {
	// Client reads Jobs and pods from the manager's cache.
	Client client.Client
	// Recorder writes core/v1 Events through client-go's record package,
	// as kube-controller-manager does: the same aggregation and the same
	// spam filter (25 Events per Job and type, then one per 5 minutes), so
	// a Job shows the same Events under either controller.
	Recorder record.EventRecorder
	Clock    clock.Clock
	// ManageUnmanaged also runs Jobs without spec.managedBy (or with the
	// built-in controller's name): for control planes without
	// kube-controller-manager's Job controller. Never with one.
	ManageUnmanaged bool
	// Workers is the number of Jobs synced in parallel (default 5, as
	// kube-controller-manager's --concurrent-job-syncs).
	Workers int
	// Metrics is where the controller's metrics are registered, once per
	// process (with the worker's name as a label, say); nil:
	// controller-runtime's registry.
	Metrics prometheus.Registerer

	podExpectations       podExpectations
	finalizerExpectations finalizerExpectations
	written               writtenVersions
	backoff               backoffStore
	// finishedWritten holds Jobs whose terminal condition was written and
	// not yet seen in the cache: nothing more to do for them.
	finishedWritten sync.Map
}

// Manages says whether the controller runs this Job: spec.managedBy is
// jobferry.dev/worker, or, with ManageUnmanaged, unset or the built-in name.
func (r *Reconciler) Manages(job *batchv1.Job) bool {
	managedBy := ptr.Deref(job.Spec.ManagedBy, "")
	if managedBy == v1alpha1.WorkerManagedBy {
		return true
	}
	return r.ManageUnmanaged && (managedBy == "" || managedBy == batchv1.JobControllerName)
}

// SetupWithManager registers the Job controller and the orphan pod
// controller, and the pod index both use.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Workers <= 0 {
		r.Workers = 5
	}
	r.podExpectations.clock = r.Clock
	registerMetrics(r.Metrics)
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, controllerUIDField, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by controller: %w", err)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("worker-job").
		Watches(&batchv1.Job{}, r.jobEvents()).
		Watches(&corev1.Pod{}, r.podEvents()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the worker Job controller: %w", err)
	}
	orphans := &orphanPodReconciler{jobs: r}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("worker-job-orphan-pods").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(orphans.candidate))).
		Complete(orphans)
	if err != nil {
		return fmt.Errorf("setting up the orphan pod controller: %w", err)
	}
	return nil
}

// Reconcile syncs one Job.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	start := r.Clock.Now()
	key := req.String()
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.podExpectations.forget(key)
			r.finalizerExpectations.forget(key)
			r.backoff.remove(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading Job %s: %w", key, err)
	}
	// Checked again on the fresh read: the queued key may now name a
	// different Job managed by someone else.
	if !r.Manages(job) {
		return reconcile.Result{}, nil
	}
	if jobstatus.Finished(job.Status) {
		r.backoff.remove(key)
		r.written.forget(job.UID)
		r.finishedWritten.Delete(job.UID)
		return reconcile.Result{}, r.releaseFinishedJobPods(ctx, job)
	}
	if _, ok := r.finishedWritten.Load(job.UID); ok {
		return reconcile.Result{}, nil
	}
	if r.written.stale(job.UID, job.ResourceVersion) {
		// Our own write's event is on its way and will sync the Job again.
		return reconcile.Result{RequeueAfter: syncBatchPeriod}, nil
	}
	if mode := ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion); mode != batchv1.NonIndexedCompletion && mode != batchv1.IndexedCompletion {
		r.Recorder.Event(job, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return reconcile.Result{}, nil
	}

	action, requeueAfter, err := r.syncJob(ctx, job, key)
	result := "success"
	if err != nil {
		result = "error"
	}
	mode := completionModeLabel(job)
	syncDuration.WithLabelValues(mode, result, action).Observe(r.Clock.Since(start).Seconds())
	syncsTotal.WithLabelValues(mode, result, action).Inc()
	if err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(2).Info("conflict writing Job status; retrying", "job", key)
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: requeueAfter}, nil
}

// releaseFinishedJobPods strips the finalizer from pods a finished Job left
// holding it (created or seen after the last count).
func (r *Reconciler) releaseFinishedJobPods(ctx context.Context, job *batchv1.Job) error {
	pods, err := r.podsOf(ctx, job)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if !hasTrackingFinalizer(p) {
			continue
		}
		if err := r.removeTrackingFinalizer(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing pod %s of finished Job %s: %w", p.Name, job.Name, err)
		}
	}
	return nil
}

// podsOf lists the pods the Job controls. Pods matching its selector without
// a controller are not adopted (the upstream controller would adopt them).
func (r *Reconciler) podsOf(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingFields{controllerUIDField: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func requestFor(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
}

// jobEvents enqueues managed Jobs: new and deleted ones and spec changes at
// once, status-only changes batched; a changed active deadline at its expiry.
func (r *Reconciler) jobEvents() handler.EventHandler {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			if job, ok := e.Object.(*batchv1.Job); ok && r.Manages(job) {
				q.Add(requestFor(job))
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			oldJob, ok1 := e.ObjectOld.(*batchv1.Job)
			job, ok2 := e.ObjectNew.(*batchv1.Job)
			if !ok1 || !ok2 || !r.Manages(job) {
				return
			}
			if jobstatus.Finished(job.Status) || job.Generation != oldJob.Generation {
				q.Add(requestFor(job))
			} else {
				q.AddAfter(requestFor(job), syncBatchPeriod)
			}
			if ads := job.Spec.ActiveDeadlineSeconds; ads != nil && job.Status.StartTime != nil &&
				!ptr.Equal(ads, oldJob.Spec.ActiveDeadlineSeconds) {
				q.AddAfter(requestFor(job), time.Duration(*ads)*time.Second-r.Clock.Since(job.Status.StartTime.Time))
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			if job, ok := e.Object.(*batchv1.Job); ok && r.Manages(job) {
				r.finishedWritten.Delete(job.UID)
				r.written.forget(job.UID)
				q.Add(requestFor(job))
			}
		},
	}
}

// podEvents turns pod changes into expectation updates and batched syncs of
// the managed Job that controls the pod.
func (r *Reconciler) podEvents() handler.EventHandler {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			pod, job := r.podAndJob(ctx, e.Object)
			if job == nil {
				return
			}
			countTrackedTermination(nil, pod)
			key := requestFor(job).String()
			if pod.DeletionTimestamp != nil {
				r.podDeleted(key, pod, false)
			} else {
				r.podExpectations.observe(key, 1, 0)
			}
			q.AddAfter(requestFor(job), syncBatchPeriod)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
			pod, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 || pod.ResourceVersion == oldPod.ResourceVersion {
				return
			}
			job := r.controllingJob(ctx, pod)
			if job == nil {
				job = r.controllingJob(ctx, oldPod)
			}
			if job == nil {
				return
			}
			countTrackedTermination(oldPod, pod)
			key := requestFor(job).String()
			if pod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
				r.podDeleted(key, pod, false)
			} else if !hasTrackingFinalizer(pod) {
				r.finalizerExpectations.observed(key, pod.UID)
			}
			q.AddAfter(requestFor(job), syncBatchPeriod)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			pod, job := r.podAndJob(ctx, e.Object)
			if job == nil {
				return
			}
			countTrackedTermination(pod, nil)
			r.podDeleted(requestFor(job).String(), pod, true)
			q.AddAfter(requestFor(job), syncBatchPeriod)
		},
	}
}

// podDeleted records a deletion the Job may have expected. The final delete,
// or the deletion of a pod without the finalizer, also ends any wait for the
// pod's finalizer removal.
func (r *Reconciler) podDeleted(key string, pod *corev1.Pod, final bool) {
	r.podExpectations.observe(key, 0, 1)
	if final || !hasTrackingFinalizer(pod) {
		r.finalizerExpectations.observed(key, pod.UID)
	}
}

// podAndJob is the pod of an event and the managed Job controlling it; the
// Job is nil when there is none.
func (r *Reconciler) podAndJob(ctx context.Context, obj client.Object) (*corev1.Pod, *batchv1.Job) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return pod, r.controllingJob(ctx, pod)
}

// controllingJob is the managed Job controlling the pod, or nil.
func (r *Reconciler) controllingJob(ctx context.Context, pod *corev1.Pod) *batchv1.Job {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, job); err != nil {
		return nil
	}
	if job.UID != ref.UID || !r.Manages(job) {
		return nil
	}
	return job
}

// countTrackedTermination counts a pod entering and leaving the state
// "terminal with the tracking finalizer" (old or new is nil on create and
// delete).
func countTrackedTermination(old, cur *corev1.Pod) {
	tracked := func(p *corev1.Pod) bool {
		return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && hasTrackingFinalizer(p)
	}
	switch was, is := tracked(old), tracked(cur); {
	case !was && is:
		terminatedPodsTrackingFinalizerTotal.WithLabelValues("add").Inc()
	case was && !is:
		terminatedPodsTrackingFinalizerTotal.WithLabelValues("delete").Inc()
	}
}

// orphanPodReconciler strips the tracking finalizer from pods no Job will
// count any more: no controller, a controlling Job that is gone, or one this
// controller manages that has finished. Pods of Jobs managed by anyone else
// are left alone.
type orphanPodReconciler struct{ jobs *Reconciler }

// candidate: pods holding the finalizer that lost their controller or are
// being deleted (the garbage collector's work after a Job is deleted). Pods
// of finished Jobs are released by the Job's own sync.
func (o *orphanPodReconciler) candidate(obj client.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	return ok && hasTrackingFinalizer(pod) && (metav1.GetControllerOf(pod) == nil || pod.DeletionTimestamp != nil)
}

func (o *orphanPodReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := o.jobs.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !hasTrackingFinalizer(pod) {
		return reconcile.Result{}, nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return reconcile.Result{}, nil
		}
		job := &batchv1.Job{}
		err := o.jobs.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, job)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return reconcile.Result{}, fmt.Errorf("reading the Job of pod %s: %w", req, err)
		case err == nil && job.UID == ref.UID && (!o.jobs.Manages(job) || !jobstatus.Finished(job.Status)):
			return reconcile.Result{}, nil
		}
	}
	if err := o.jobs.removeTrackingFinalizer(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing the tracking finalizer of orphan pod %s: %w", req, err)
	}
	return reconcile.Result{}, nil
}
