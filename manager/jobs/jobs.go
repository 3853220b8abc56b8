package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
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
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// managerAPI names the manager cluster's API server in Events.
const managerAPI = "the manager cluster's API server"

func workerAPI(worker string) string { return "worker cluster " + worker + "'s API server" }

// The manager cluster rights the Job controller and the webhooks use, for
// the manager chart (hack/generate.sh writes them with controller-gen into
// charts/jobferry-manager/files/). Every read goes through the cache: list
// and watch, never get (the install test checks each right is used).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// JobReconciler dispatches manager Jobs: it places an unplaced Job, injecting
// the worker's directives and unsuspending it in the same update (recorded
// before anything exists on the worker), creates its mirror, carries later
// spec changes to the mirror, copies the mirror's status back, and deletes
// the mirror once its final status is copied or the manager Job is gone.
// What to do next is decided by policy.Next, a pure function of what the
// reconcile read (reads.go); the reconciler reads, asks, writes (apply: one
// handler per kind of step), and asks again. A Job with nothing to run it
// completes itself (policy.NothingToRun); one that waits shows why in its
// Suspended condition (policy.Waiting); a write the API server refuses
// becomes a Warning Event on the Job and is not made again until the Job
// changes (refusals.go). What it is told of the workers arrives through
// its subscription to the pool (jobevents.go).
type JobReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Workers are the connections to the worker clusters (workers.Pool),
	// and what the Job controller is told of them.
	Workers Workers
	// Policy says which Jobs may be dispatched, and where (tenancy).
	Policy *admission.DispatchPolicy
	// Keys gives the key that seals jobferry's state on manager Jobs
	// (statekey.Keys; package jobstate).
	Keys jobstate.KeySource
	// APIReader reads from the manager cluster's API server what the cache
	// does not know yet (a namespace created moments before its Job) or does
	// not keep (a manager Job's whole pod template).
	APIReader client.Reader
	Clock     clock.Clock
	// Config is what policy.Next applies: this installation's origin and
	// ID on the workers, the worker-lost timeout, the status batch period,
	// whether finished mirrors are deleted.
	Config policy.Config
	// Concurrency is the number of Jobs reconciled at once.
	Concurrency int
	// CapacitySettle is how long after a mirror's pods run a capacity
	// summary is trusted to include them (see assumeCache).
	CapacitySettle time.Duration
	// Queue, when set, is Kueue on the manager cluster: a Job that names a
	// LocalQueue runs when Kueue admits it, where jobferry places it
	// (policy/queued.go). Nil: every Job is dispatched as soon as it fits.
	Queue Queue
	// PodAdmission dry-runs a pod of each Job in its namespace before its
	// first mirror (tenantlimits.PodAdmission); nil in unit tests, where
	// the template is taken as admitted.
	PodAdmission PodAdmitter

	// events carry what the pool tells the controller to its work queue
	// and its wake-up (jobevents.go).
	events eventSources
	// placing is what placement shares among the Jobs placed at once.
	placing placing
	// memory is what the controller remembers of the Jobs between
	// reconciles (memories.go).
	memory memory
}

// placing is what placement shares among the Jobs placed at once: the
// requests and charges of Jobs placed moments ago, and the Jobs waiting
// for room.
type placing struct {
	// mu serialises placement, so two Jobs never both take the same free
	// capacity, nor the same room in a namespace's quota.
	mu sync.Mutex
	// assume holds what placed Jobs request until the workers' summaries
	// show it: placement adds, mirrors running and summaries end it.
	assume *assumeCache
	// waiting holds the Jobs no worker had room for (waitingroom.go).
	waiting *waitingRoom
	// charging: the quota charges of Jobs placed moments ago
	// (tenantlimits.go).
	charging chargesInFlight
	// quotaWaiting: the Jobs a full quota of their namespace holds back.
	quotaWaiting quotaWaiters
}

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
	counting, err := jobInformer.AddEventHandler(tally.handler())
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
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return result, err
}

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

// stepMemo carries what one step learned to the next steps of the same
// reconcile.
type stepMemo struct {
	// placement explains the placement made, for the Dispatched Event.
	placement string
	// foreign is a same-named Job on the worker that jobferry did not create.
	foreign *batchv1.Job
}

// WriteJob writes a manager Job changed from original (as read) to job,
// with its jobferry state sealed: every write of the Job's metadata and
// spec by the manager goes through here, so what it leaves is always what
// Verify trusts. It sends a merge patch of what changed, on the condition
// that the Job is still at original's resourceVersion (a Conflict
// otherwise, as an update would get): only the fields the manager changes
// travel, so the Job need not be held whole to write it.
func (r *JobReconciler) writeJob(ctx context.Context, original, job *batchv1.Job) error {
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return err
	}
	sealed := jobstate.Sealed(job, key)
	patch, err := jobPatch(original, sealed)
	if err != nil {
		return fmt.Errorf("computing the patch of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if err := r.Client.Patch(ctx, sealed, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	*job = *sealed
	return nil
}

// jobPatch is the merge patch of a write of a Job's metadata and spec from
// before to after, locked to before's resourceVersion. A write that changes
// only annotations and labels (the record of a mirror's UID, the seal of
// the state) gets it from those maps; any other from the Jobs' JSON
// (withoutWhatBothHold): marshalling and diffing two Jobs' JSON was 8 % of
// the leader's CPU while it dispatched. Both compare with reflect.DeepEqual
// rather than the semantic equality: it is stricter (a quantity written two
// ways differs) and takes half the time and a sixth of the allocations; a
// false difference only sends them the longer, still exact, way.
func jobPatch(before, after *batchv1.Job) ([]byte, error) {
	from, to := withoutWhatBothHold(before, after)
	// The rest, without the maps: the template is left only if it changed.
	b, a := *from, *to
	b.Labels, b.Annotations, a.Labels, a.Annotations = nil, nil, nil, nil
	if !reflect.DeepEqual(&b, &a) {
		return client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}).Data(to)
	}
	metadata := map[string]any{"resourceVersion": before.ResourceVersion}
	if d, changed := mapPatch(before.Labels, after.Labels); changed {
		metadata["labels"] = d
	}
	if d, changed := mapPatch(before.Annotations, after.Annotations); changed {
		metadata["annotations"] = d
	}
	return json.Marshal(map[string]any{"metadata": metadata})
}

// mapPatch is the merge patch of a string map, and whether it changed: the
// keys added or changed with their values, those removed with null; null
// when none is left (as the JSON of the Jobs, which leaves out an empty
// map, would have it).
func mapPatch(before, after map[string]string) (any, bool) {
	if len(after) == 0 {
		return nil, len(before) > 0
	}
	d := map[string]any{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			d[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d[k] = nil
		}
	}
	return d, len(d) > 0
}

// withoutWhatBothHold are shallow copies of a Job before and after a write
// of its metadata and spec, without what the merge patch between them would
// leave out anyway: the status (not written through the Job itself) and the
// pod template when it did not change. The patch is computed from the two
// Jobs' JSON; marshalling and diffing whole Jobs was 6 % of the manager's
// CPU while it dispatched 100,000.
func withoutWhatBothHold(before, after *batchv1.Job) (*batchv1.Job, *batchv1.Job) {
	b, a := *before, *after
	b.Status, a.Status = batchv1.JobStatus{}, batchv1.JobStatus{}
	if reflect.DeepEqual(b.Spec.Template, a.Spec.Template) {
		b.Spec.Template, a.Spec.Template = corev1.PodTemplateSpec{}, corev1.PodTemplateSpec{}
	}
	return &b, &a
}

// finalize deletes the mirror of a manager Job that is gone or being
// deleted, and removes the finalizer an earlier version put on it. The
// mirror of a Job deleted while its worker was unreachable is left to the
// orphan collector, which deletes it once the worker is back.
func (r *JobReconciler) finalize(ctx context.Context, key types.NamespacedName, job *batchv1.Job) error {
	r.memory.refusals.forget(key)
	r.memory.finished.forget(key)
	r.memory.checks.forget(key)
	r.memory.attempts.forget(key)
	r.memory.highest.forget(key)
	r.placing.waiting.remove(key)
	r.memory.observed.take(key)
	if job == nil {
		r.placing.assume.forgetJob(key)
	}
	for _, worker := range r.Workers.Names() {
		conn := r.conn(worker)
		if conn == nil || !conn.Connected() {
			continue
		}
		m, err := conn.Mirror(ctx, key)
		if err != nil {
			return err
		}
		// Every mirror of this installation with the Job's name is one of a
		// Job that no longer exists, or of this one while it is deleted.
		if m == nil || m.DeletionTimestamp != nil || (job != nil && !mirror.IsMirrorOf(m, r.Config.Origin, job.UID)) ||
			(job == nil && !workers.MayDelete(m, r.Config.ManagerID, conn.OriginShared())) {
			continue
		}
		if _, err := workers.DeleteMirror(ctx, conn, worker, m); err != nil {
			return err
		}
	}
	if job == nil {
		return nil
	}
	r.placing.assume.forget(job.UID)
	return r.removeFinalizer(ctx, job)
}

func (r *JobReconciler) removeFinalizer(ctx context.Context, job *batchv1.Job) error {
	if !controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
		return nil
	}
	if _, over := managercache.OverBudgetOf(job); over {
		// The cache keeps jobferry's finalizer of it only; the patch
		// must keep the others the Job holds.
		stored := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), stored); err != nil {
			return client.IgnoreNotFound(err)
		}
		job = stored
	}
	updated := job.DeepCopy()
	controllerutil.RemoveFinalizer(updated, v1alpha1.MirrorFinalizer)
	if err := r.writeJob(ctx, job, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// namespaces reads manager namespaces (see namespaceReader).
func (r *JobReconciler) namespaces() admission.NamespaceReader {
	return admission.NamespaceReader{Cache: r.Client, API: r.APIReader}
}

// conn is the connection to worker, nil when there is none.
func (r *JobReconciler) conn(worker string) workers.Conn { return r.Workers.Conn(worker) }

// Workers is what the Job controller uses of the pool of connections to the
// workers: workers.Pool, or workerstest.Pool in unit tests.
type Workers interface {
	workers.Lookup
	Connected(worker string) bool
	// Subscribe has the controller told what happens on the workers.
	Subscribe(workers.Handlers)
	// RecheckRights reviews a worker's rights after a write there was
	// refused as forbidden, and returns those missing.
	RecheckRights(ctx context.Context, worker string) []workers.Right
	// RightsRefused has the rights reviewed soon: a read was refused.
	RightsRefused(worker string)
	// ReadNamespaces refreshes what is known of namespace ns on every
	// worker, before placement.
	ReadNamespaces(ctx context.Context, ns string)
}
