package jobs

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// The manager cluster rights the Job controller and the webhooks use, for
// the manager chart (hack/generate.sh writes them with controller-gen into
// charts/jobferry-manager/files/). Every read goes through the cache: list
// and watch, never get (the install test checks each right is used).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// SetupWithManager registers the controller: manager Jobs, plus the keys its
// subscription to the pool yields when mirrors, capacity or workers
// change (jobevents.go).
func (r *JobReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	// The gauges' counts, kept from the cache's Job events on every
	// replica.
	jobInformer, err := mgr.GetCache().GetInformer(context.Background(), &batchv1.Job{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting the manager Job informer for jobferry_jobs: %w", err)
	}
	tally := newJobsTally()
	counting, err := jobInformer.AddEventHandler(tally.Handler())
	if err != nil {
		return fmt.Errorf("counting the manager Jobs for jobferry_jobs: %w", err)
	}
	if _, err := jobInformer.AddEventHandler(r.quotaFreedHandler()); err != nil {
		return fmt.Errorf("watching manager Jobs finish for the Jobs their quota holds back: %w", err)
	}
	if err := crmetrics.Registry.Register(NewJobsCollector(tally, counting.HasSynced, mgr.GetClient(), r.Workers.Connected)); err != nil {
		return fmt.Errorf("registering jobferry_jobs: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("job").
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			job, ok := managercache.JobWithoutTemplate(obj)
			return ok && v1alpha1.IsManagerJob(&job)
		}), notOwnStatusWrite{})).
		WatchesRawSource(source.Channel(r.events.jobs, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.events.mirrors, enqueueWithPriority(statusPriority)))
	if r.Queue != nil {
		// Kueue's decisions arrive on the Workloads: quota reserved, the
		// check reset, admitted, evicted.
		b = b.Watches(&kueue.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &batchv1.Job{}, handler.OnlyControllerOwner()),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				before, ok1 := e.ObjectOld.(*kueue.Workload)
				after, ok2 := e.ObjectNew.(*kueue.Workload)
				return !ok1 || !ok2 || workload.Changed(before, after)
			}}))
	}
	if err := b.WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).Complete(r); err != nil {
		return err
	}
	// Like the controller, the wake-up runs on the leader only.
	return mgr.Add(manager.RunnableFunc(r.wakeLoop))
}

// init completes the reconciler: its memories and event sources, its
// subscription to the pool.
func (r *JobReconciler) init() {
	r.Recorder = eventnote.Bound(r.Recorder)
	r.placing.assume = newAssumeCache(r.Clock, r.CapacitySettle)
	r.placing.waiting = newWaitingRoom()
	r.memory.refusals = newRefusalMemo()
	r.events = newEventSources()
	r.subscribe()
}

// notOwnStatusWrite lets through every change of a manager Job but one that
// touched only its status: jobferry is the only writer of a manager Job's
// status (the Job controller of the manager cluster leaves it alone, as
// managedBy says), and the reconcile that wrote it acted on what it wrote.
// Reconciling again after each of its status copies doubled the reconciles
// per Job. Spec, metadata (annotations, finalizers, labels) and deletion
// changes all pass.
type notOwnStatusWrite struct {
	predicate.Funcs
}

func (notOwnStatusWrite) Update(e event.UpdateEvent) bool {
	before, ok1 := managercache.JobWithoutTemplate(e.ObjectOld)
	after, ok2 := managercache.JobWithoutTemplate(e.ObjectNew)
	if !ok1 || !ok2 {
		return true
	}
	return !statusOnlyChange(&before, &after)
}

// statusOnlyChange: between two versions of a Job only the status (and the
// resourceVersion that records it) changed. The spec is not compared: the
// API server moves a Job's generation with every change of its spec (its
// Job strategy), and comparing specs on every event of every Job was 2 %
// of the manager's CPU while it dispatched. A change the cache does not
// show (of the Job's own annotations, which it does not keep) leaves the
// status as it was too: it is not status only, and passes — a write
// refused for what those annotations held is tried again once they change.
func statusOnlyChange(before, after *batchv1.Job) bool {
	if before.Generation != after.Generation {
		return false
	}
	// Shallow copies to compare without what every write moves: they share
	// the cached Jobs' maps and slices, and are only read (copying them
	// whole for every event was 2 % of what the manager allocated).
	b, a := before.ObjectMeta, after.ObjectMeta
	b.ResourceVersion, a.ResourceVersion = "", ""
	b.ManagedFields, a.ManagedFields = nil, nil
	return equality.Semantic.DeepEqual(&b, &a) && !equality.Semantic.DeepEqual(&before.Status, &after.Status)
}

// statusPriority puts the manager Jobs whose mirror changed ahead of the
// others in the work queue: copying what a worker reports (and deleting a
// finished mirror) frees the worker's capacity for the next Jobs, while a
// backlog of Jobs waiting for placement can wait for it.
const statusPriority = 10

// enqueueWithPriority adds the object of a generic event to the work queue
// with priority (the controller's queue is controller-runtime's priority
// queue, its default).
func enqueueWithPriority(priority int) handler.EventHandler {
	return handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, req)
			return
		}
		q.Add(req)
	}}
}

// Reconcile moves one manager Job along its dispatch. A write that lost a
// race with another write (the cache lagging behind our own previous write,
// typically) is retried quietly instead of logged as an error.
func (r *JobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return result, err
}

// conflictRetry is how soon a Job whose write lost a race, or whose cache
// has not caught up with the manager's own last write, is looked at again.
const conflictRetry = 100 * time.Millisecond

// maxSteps bounds the steps one reconcile takes: placing, creating the
// mirror, copying its final status and deleting it are each one step, and a
// reconcile goes on with the next as long as what it wrote allows.
const maxSteps = 6

// reconcile reads what there is to know about the Job (readState), asks
// Next what to do, does it, and asks again with what it wrote, until a
// step has to wait for the clusters' answer.
func (r *JobReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		job = nil
	}
	if job != nil && !v1alpha1.IsManagerJob(job) {
		return reconcile.Result{}, nil
	}
	if job != nil && r.memory.replaced.stale(job, r.Clock.Now()) {
		// Looked at again as soon as a Conflict would have been: the
		// event of a status write of this manager's own brings no
		// reconcile (notOwnStatusWrite).
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	var memo stepMemo
	for range maxSteps {
		s, err := r.readState(ctx, req.NamespacedName, job, &memo)
		if err != nil {
			return reconcile.Result{}, err
		}
		st := policy.Next(s, r.Config)
		logf.FromContext(ctx).V(2).Info("step", "step", st.Kind.String(), "worker", s.Worker)
		result, more, err := r.apply(ctx, req.NamespacedName, s, st, &memo)
		if err != nil || !more {
			return result, err
		}
	}
	return reconcile.Result{Requeue: true}, nil
}
