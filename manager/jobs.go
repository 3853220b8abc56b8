package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/mirror"
)

// Event reasons on manager Jobs.
const (
	ReasonPlaced             = "Placed"
	ReasonUnschedulable      = "Unschedulable"
	ReasonInvalidSelector    = "InvalidClusterSelector"
	ReasonMirrorCreated      = "MirrorCreated"
	ReasonNameConflict       = "NameConflict"
	ReasonStatusRejected     = "StatusRejected"
	ReasonMirrorLeftOnWorker = "MirrorLeftOnWorker"
	ReasonMirrorSuspended    = "MirrorSuspended"
	ReasonMirrorResumed      = "MirrorResumed"
	ReasonMirrorUpdated      = "MirrorUpdated"
	ReasonWorkerLost         = "WorkerLost"
	ReasonMissingRights      = "WorkerMissingRights"
	ReasonInvalidMirror      = "InvalidMirror"
	// ReasonNotAllowed: the dispatch policy refuses the Job (a namespace
	// not opted in, a reserved one, pods its Pod Security level forbids):
	// it reached jobferry while the webhook did not check it.
	ReasonNotAllowed = "DispatchNotAllowed"
)

// managerAPI names the manager cluster's API server in Events.
const managerAPI = "the manager cluster's API server"

func workerAPI(worker string) string { return "worker cluster " + worker + "'s API server" }

// The manager cluster rights the Job controller and the webhooks use, for
// the manager chart (hack/generate.sh writes them with controller-gen into
// charts/jobferry-manager/files/). Every read goes through the cache: list
// and watch, never get (the install test checks each right is used).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list;watch;update
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// JobReconciler dispatches manager Jobs: it places an unplaced Job (recording
// the placement before anything exists on the worker), creates its mirror,
// injects the worker's directives and unsuspends it in one update, carries
// later spec changes to the mirror, copies the mirror's status back, and
// deletes the mirror once its final status is copied or the manager Job is
// deleted. A Job with nothing to run it completes itself (nothingtorun.go);
// one that waits shows why in its Suspended condition (pending.go); a write
// the API server refuses becomes a Warning Event on the Job (refusals.go).
type JobReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Registry *Registry
	Origin   string
	// Policy says which Jobs may be dispatched, and where (tenancy).
	Policy *DispatchPolicy
	Clock  clock.Clock
	// Workers is the number of Jobs reconciled at once.
	Workers int
	// CapacitySettle is how long after a mirror's pods run a capacity
	// summary is trusted to include them (see assumeCache).
	CapacitySettle time.Duration
	// WorkerLostTimeout is how long a worker may stay disconnected before its
	// unfinished Jobs are dispatched elsewhere.
	WorkerLostTimeout time.Duration

	assume *assumeCache
	// refusals remembers writes the API server rejected, so they are not
	// retried until the Job changes.
	refusals *refusalMemo
	// finished remembers the Jobs whose finished status this manager wrote:
	// a reconcile on a cache that has not caught up with that write, once
	// the finished mirror is deleted, must not create the mirror again (the
	// Job would run twice).
	finished sync.Map // types.NamespacedName -> types.UID
	// placeMu serialises placement, so two Jobs never both take the same
	// free capacity.
	placeMu sync.Mutex
}

// SetupWithManager registers the controller: manager Jobs, plus the keys the
// registry sends when mirrors, capacity or workers change.
func (r *JobReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.assume = newAssumeCache(r.Clock, r.CapacitySettle)
	r.refusals = newRefusalMemo()
	r.Registry.onCapacity = r.assume.capacitySeen
	if err := metrics.Registry.Register(newJobsCollector(mgr.GetClient())); err != nil {
		return fmt.Errorf("registering jobferry_jobs: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("job").
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			job, ok := obj.(*batchv1.Job)
			return ok && isManagerJob(job)
		}), notOwnStatusWrite{})).
		WatchesRawSource(source.Channel(r.Registry.JobEvents(), &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.Registry.MirrorEvents(), enqueueWithPriority(statusPriority))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Complete(r)
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
	before, ok1 := e.ObjectOld.(*batchv1.Job)
	after, ok2 := e.ObjectNew.(*batchv1.Job)
	if !ok1 || !ok2 {
		return true
	}
	return !statusOnlyChange(before, after)
}

// statusOnlyChange: between two versions of a Job only the status (and the
// resourceVersion that records it) changed.
func statusOnlyChange(before, after *batchv1.Job) bool {
	if before.Generation != after.Generation || !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
		return false
	}
	b, a := before.ObjectMeta.DeepCopy(), after.ObjectMeta.DeepCopy()
	b.ResourceVersion, a.ResourceVersion = "", ""
	b.ManagedFields, a.ManagedFields = nil, nil
	return equality.Semantic.DeepEqual(b, a)
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

// Reconcile moves one manager Job one step along its dispatch. A write that
// lost a race with another write (the cache lagging behind our own previous
// write, typically) is retried quietly instead of logged as an error.
func (r *JobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	result, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return result, err
}

func (r *JobReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.refusals.forget(req.NamespacedName)
			r.finished.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isManagerJob(job) {
		return reconcile.Result{}, nil
	}
	if job.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, job)
	}
	if worker := job.Annotations[v1alpha1.WorkerAnnotation]; worker != "" {
		return r.sync(ctx, job, worker)
	}
	if nothingToRun(job) && !isFinished(job) {
		if err := r.completeWithoutPods(ctx, job); err != nil {
			return r.refused(ctx, job, writeJob, "completing the Job (completions is 0)", managerAPI, err)
		}
		return reconcile.Result{}, nil
	}
	return r.place(ctx, job)
}

func (r *JobReconciler) place(ctx context.Context, job *batchv1.Job) (reconcile.Result, error) {
	if isFinished(job) {
		return reconcile.Result{}, nil
	}
	// The webhook applies the policy at creation; this catches Jobs created
	// while it was down or not registered, and namespaces changed since.
	ns, err := getNamespace(ctx, r.Client, job.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if _, refusal := r.Policy.Admit(job, ns); refusal != nil {
		return r.notAllowed(ctx, job, refusal)
	}
	if userSuspended(job) {
		return reconcile.Result{}, r.showWaiting(ctx, job, userSuspendedWaiting())
	}
	if r.refusals.blocked(job, writePlacement) {
		// The user was told; the same write would be rejected again.
		return reconcile.Result{}, nil
	}
	// Worker namespaces are read now, not under the placement lock.
	r.Registry.readNamespaces(ctx, job.Namespace)
	decision, invalid, err := r.decide(ctx, job, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	if invalid != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidSelector, "Place", "%v", invalid)
		return reconcile.Result{}, r.showWaiting(ctx, job, waitingForWorker("%v", invalid))
	}
	if !decision.Placed() {
		dispatchTotal.WithLabelValues("", "unschedulable").Inc()
		// Capacity and worker changes retry sooner; this is a safety net.
		retry := reconcile.Result{RequeueAfter: 5 * time.Minute}
		// The Event goes with a change of the Suspended condition (a new
		// reason, or new figures at most every pendingRefresh), not with
		// every retry: under load every capacity change retries every
		// waiting Job.
		wrote, err := r.updateWaiting(ctx, job, waitingForWorker("%s", decision.Summary()))
		if wrote {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonUnschedulable, "Place", "%s", decision.Summary())
		}
		return retry, err
	}
	attempt, _ := strconv.Atoi(job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	updated := job.DeepCopy()
	metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.WorkerAnnotation, decision.Worker)
	metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.DispatchAttemptAnnotation, strconv.Itoa(attempt+1))
	controllerutil.AddFinalizer(updated, v1alpha1.MirrorFinalizer)
	// The placement is stored before the mirror exists, so a manager that
	// restarts in between finds it and creates the mirror where it was meant.
	if err := r.Client.Update(ctx, updated); err != nil {
		r.assume.forget(job.UID)
		if reported(err) {
			if werr := r.showWaiting(ctx, job, waitingForWorker("recording the placement on %s was refused: %s", decision.Worker, apiMessage(err))); werr != nil {
				return reconcile.Result{}, werr
			}
		}
		return r.refused(ctx, job, writePlacement, "recording the placement on "+decision.Worker, managerAPI, err)
	}
	r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, ReasonPlaced, "Place", "%s", decision.Summary())
	r.Registry.jobsChanged(decision.Worker)
	return reconcile.Result{}, nil
}

// notAllowed shows on the Job why the dispatch policy keeps it on the
// manager, once (and again when the reason changes), and looks again in a
// minute: an administrator may opt its namespace in meanwhile.
func (r *JobReconciler) notAllowed(ctx context.Context, job *batchv1.Job, refusal *Refusal) (reconcile.Result, error) {
	w := waiting{ReasonNotAllowed, fmt.Sprintf("jobferry does not dispatch this Job (rule: %s): %s", refusal.Rule, refusal.Message)}
	wrote, err := r.updateWaiting(ctx, job, w)
	if err != nil {
		return reconcile.Result{}, err
	}
	if wrote {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonNotAllowed, "Place", "%s", w.message)
	}
	return reconcile.Result{RequeueAfter: time.Minute}, nil
}

// decide places the Job and assumes its request on the chosen worker at once,
// under one lock, so concurrent placements see each other's choices; the
// slower write that records the placement happens outside the lock.
// invalid says what is wrong with the Job itself; err is a failure to read.
func (r *JobReconciler) decide(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace) (decision dispatch.Decision, invalid, err error) {
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	workers, err := r.workerViews(ctx, job, ns)
	if err != nil {
		return dispatch.Decision{}, nil, err
	}
	decision, invalid = dispatch.Place(job, workers)
	if invalid == nil && decision.Placed() {
		r.assume.assume(job.UID, decision.Worker, decision.Pool, decision.Request)
	}
	return decision, invalid, nil
}

// workerViews describes every WorkerCluster for placement of a Job from the
// manager namespace ns.
func (r *JobReconciler) workerViews(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace) ([]dispatch.Worker, error) {
	var list v1alpha1.WorkerClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	excluded := strings.Split(job.Annotations[v1alpha1.ExcludedWorkersAnnotation], ",")
	views := make([]dispatch.Worker, 0, len(list.Items))
	for _, wc := range list.Items {
		view := dispatch.Worker{
			Name: wc.Name, Labels: wc.Labels, Cordoned: wc.Spec.Cordoned, Namespaces: wc.Spec.Namespaces,
			Directives: wc.Spec.Scheduling, Assumed: r.assume.assumed(wc.Name),
		}
		var unavailable []string
		if rem := r.Registry.remote(wc.Name); rem != nil && rem.connected() {
			view.Connected = true
			if capacity := rem.capacity(ctx); capacity != nil {
				view.Pools = capacity.Pools
				if view.Pools == nil {
					view.Pools = []v1alpha1.NodePool{}
				}
			}
			if missing := rem.missingRights(); len(missing) > 0 {
				unavailable = append(unavailable, missingMessage(missing))
			}
			if rem.mayUse(job.Namespace) {
				workerNS, err := rem.namespace(ctx, job.Namespace)
				if err != nil {
					return nil, err
				}
				if why := r.Policy.WorkerNamespaceRejects(ns, workerNS); why != "" {
					unavailable = append(unavailable, why)
				}
				if workerNS == nil && !rem.mayCreateNamespaces() {
					unavailable = append(unavailable, fmt.Sprintf("namespace %s does not exist there, and the manager does not create namespaces there", job.Namespace))
				}
			}
		}
		if slices.Contains(excluded, wc.Name) {
			unavailable = append(unavailable, fmt.Sprintf("a Job %s/%s not created by jobferry exists there", job.Namespace, job.Name))
		}
		view.Unavailable = strings.Join(unavailable, "; ")
		views = append(views, view)
	}
	return views, nil
}

func (r *JobReconciler) sync(ctx context.Context, job *batchv1.Job, worker string) (reconcile.Result, error) {
	rem := r.Registry.remote(worker)
	if rem == nil || !rem.connected() {
		return r.workerDown(ctx, job, worker)
	}
	key := client.ObjectKeyFromObject(job)
	m, err := rem.mirror(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if m != nil && (!mirror.IsMirrorOf(m, r.Origin, job.UID) || attemptOf(m) < attemptOf(job)) {
		// A stale mirror: of an earlier manager Job of the same name (gone,
		// since names are unique), or of an earlier attempt of this one (the
		// worker was lost, came back and was chosen again). It is fenced:
		// deleted, its status never copied.
		if m.DeletionTimestamp == nil {
			if err := deleteMirror(ctx, rem, m); err != nil {
				return r.refused(ctx, job, writeMirrorGone, "deleting the mirror", workerAPI(worker), err)
			}
		}
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if m == nil {
		if isFinished(job) || r.wroteFinished(job) {
			r.assume.forget(job.UID)
			return reconcile.Result{}, nil
		}
		return r.createMirror(ctx, job, rem, worker)
	}
	if ready := ptr.Deref(m.Status.Ready, 0); mirror.Finished(m.Status) || (m.Status.Active > 0 && ready == m.Status.Active) {
		r.assume.running(job.UID)
	}
	if needsActivation(job) {
		if err := r.activate(ctx, job, worker); err != nil {
			return r.refused(ctx, job, writeActivation, "injecting "+worker+"'s directives and unsuspending the Job", managerAPI, err)
		}
	}
	if !mirror.Finished(m.Status) && !isFinished(job) {
		if result, err, wrote := r.syncMirrorSpec(ctx, job, rem, m); wrote || err != nil || !result.IsZero() {
			// The worker's answer to the new spec comes with the mirror's
			// next event.
			return result, err
		}
	}
	if err := r.copyStatus(ctx, job, m, worker); err != nil {
		return reconcile.Result{}, err
	}
	if mirror.Finished(m.Status) && isFinished(job) {
		if err := deleteMirror(ctx, rem, m); err != nil {
			return r.refused(ctx, job, writeMirrorGone, "deleting the mirror", workerAPI(worker), err)
		}
		r.assume.forget(job.UID)
		return reconcile.Result{}, r.removeFinalizer(ctx, job)
	}
	return reconcile.Result{}, nil
}

func (r *JobReconciler) createMirror(ctx context.Context, job *batchv1.Job, rem *remote, worker string) (reconcile.Result, error) {
	if !rem.mayUse(job.Namespace) {
		// The WorkerCluster's namespaces changed since the placement.
		return reconcile.Result{}, r.releaseWithWarning(ctx, job, worker, fmt.Sprintf(
			"worker cluster %s takes Jobs from namespaces %s only (spec.namespaces); the Job is placed again", worker, strings.Join(rem.namespaces, ", ")))
	}
	if missing := rem.missingRights(); !mayCreateMirrors(missing, job.Namespace) {
		return reconcile.Result{}, r.releaseForRights(ctx, job, worker, missing)
	}
	if r.refusals.blocked(job, writeMirror) || r.refusals.blocked(job, writeNamespace) {
		return reconcile.Result{}, nil
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	if rem.mayCreateNamespaces() {
		ns, err := getNamespace(ctx, r.Client, job.Namespace)
		if err != nil {
			return reconcile.Result{}, err
		}
		// The worker's Pod Security admission holds the mirror's pods to
		// the manager namespace's levels.
		if err := rem.ensureNamespace(ctx, job.Namespace, podSecurityLabels(ns)); err != nil {
			return r.mirrorRefused(ctx, job, writeNamespace, "creating namespace "+job.Namespace, worker, err)
		}
	}
	attempt, _ := strconv.Atoi(job.Annotations[v1alpha1.DispatchAttemptAnnotation])
	m, err := r.desiredMirror(job, wc)
	if err != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidMirror, "CreateMirror", "cannot build the mirror for %s: %v", worker, err)
		return reconcile.Result{}, r.showWaiting(ctx, job, waitingForMirror(worker, "cannot build its mirror: %v", err))
	}
	err = rem.client().Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := rem.uncachedJob(ctx, client.ObjectKeyFromObject(m))
		if getErr != nil {
			return reconcile.Result{}, fmt.Errorf("reading the Job %s/%s that exists on %s: %w", m.Namespace, m.Name, worker, getErr)
		}
		if mirror.IsMirrorOf(existing, r.Origin, job.UID) {
			// Ours, created earlier; the cache has not caught up yet.
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		return reconcile.Result{}, r.conflict(ctx, job, worker)
	}
	if err != nil {
		dispatchTotal.WithLabelValues(worker, "error").Inc()
		return r.mirrorRefused(ctx, job, writeMirror, "creating the mirror", worker, err)
	}
	dispatchTotal.WithLabelValues(worker, "created").Inc()
	if attempt <= 1 {
		dispatchDuration.Observe(r.Clock.Since(job.CreationTimestamp.Time).Seconds())
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonMirrorCreated, "Dispatch", "created mirror Job on %s (attempt %d)", worker, max(attempt, 1))
	if needsActivation(job) {
		if err := r.activate(ctx, job, worker); err != nil {
			return r.refused(ctx, job, writeActivation, "injecting "+worker+"'s directives and unsuspending the Job", managerAPI, err)
		}
		// The mirror's first status replaces the Suspended condition the Job
		// may show while it waited.
		return reconcile.Result{}, r.copyStatus(ctx, job, m, worker)
	}
	// Running already (the user resumed it, or it opted in unsuspended): its
	// template is immutable, so the directives went into the mirror only.
	if err := r.recordInjected(ctx, job, wc.Spec.Scheduling); err != nil {
		return r.refused(ctx, job, writeJob, "recording the directives injected into the mirror", managerAPI, err)
	}
	return reconcile.Result{}, r.copyStatus(ctx, job, m, worker)
}

// desiredMirror is the mirror of the manager Job as it is now, for the
// worker wc: what createMirror creates and syncMirrorSpec keeps in step.
func (r *JobReconciler) desiredMirror(job *batchv1.Job, wc *v1alpha1.WorkerCluster) (*batchv1.Job, error) {
	m, err := mirror.Build(job, mirror.Identity{Origin: r.Origin, UID: job.UID, Attempt: max(attemptOf(job), 1)}, wc.Spec.JobController, &wc.Spec.Scheduling)
	if err != nil {
		return nil, err
	}
	if needsActivation(job) {
		// Held only by the webhook, to wait for placement: the mirror runs.
		m.Spec.Suspend = ptr.To(false)
	}
	return m, nil
}

// mirrorRefused reports a refused write on the worker for a Job that has no
// mirror yet: on the Job (Event and Suspended condition), and, when the
// worker refused it as forbidden, by checking the worker's rights at once, so
// that a credential lacking them releases the Job for another worker.
func (r *JobReconciler) mirrorRefused(ctx context.Context, job *batchv1.Job, w write, what, worker string, err error) (reconcile.Result, error) {
	if reported(err) {
		if werr := r.showWaiting(ctx, job, waitingForMirror(worker, "%s was refused: %s", what, apiMessage(err))); werr != nil {
			return reconcile.Result{}, werr
		}
	}
	result, rerr := r.refused(ctx, job, w, what, workerAPI(worker), err)
	if classify(err) == forbidden {
		if missing := r.Registry.recheckRights(ctx, worker); len(missing) > 0 {
			return reconcile.Result{}, r.releaseForRights(ctx, job, worker, missing)
		}
	}
	return result, rerr
}

// releaseForRights undoes the placement of a Job whose mirror the worker's
// credential may not create, so it is placed again where it can run (or
// waits, saying why, until the rights are granted).
func (r *JobReconciler) releaseForRights(ctx context.Context, job *batchv1.Job, worker string, missing []right) error {
	return r.releaseWithWarning(ctx, job, worker, fmt.Sprintf("worker cluster %s: %s; the Job is placed again (see the WorkerCluster's %s condition)",
		worker, missingMessage(missing), v1alpha1.ConditionAuthorized))
}

// releaseWithWarning releases a Job that has no mirror on worker and says
// why in a Warning Event.
func (r *JobReconciler) releaseWithWarning(ctx context.Context, job *batchv1.Job, worker, why string) error {
	if err := r.release(ctx, job, worker, nil); err != nil {
		return fmt.Errorf("releasing the placement on %s: %w", worker, err)
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonMissingRights, "Dispatch", "%s", why)
	return nil
}

// release undoes the placement of a Job on worker, so it is placed again;
// change, when set, edits the Job in the same write. The Job object is
// updated with what was written.
func (r *JobReconciler) release(ctx context.Context, job *batchv1.Job, worker string, change func(*batchv1.Job)) error {
	updated := job.DeepCopy()
	delete(updated.Annotations, v1alpha1.WorkerAnnotation)
	if change != nil {
		change(updated)
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		return err
	}
	r.assume.forget(job.UID)
	r.Registry.jobsChanged(worker)
	*job = *updated
	return nil
}

// syncMirrorSpec carries what the user changed on the running manager Job
// (parallelism, completions, deadline, suspend, ...; see mirror.SpecUpdate)
// to its mirror. wrote reports an update made.
func (r *JobReconciler) syncMirrorSpec(ctx context.Context, job *batchv1.Job, rem *remote, m *batchv1.Job) (result reconcile.Result, err error, wrote bool) {
	if r.refusals.blocked(job, writeMirrorSpec) {
		return reconcile.Result{}, nil, false
	}
	// SpecUpdate compares the pod template only while the mirror's may
	// change; otherwise the manager Job's spec as it is will do, and the
	// mirror is not built on every status change.
	desired := &batchv1.Job{Spec: job.Spec}
	if mirror.TemplateMutable(m) {
		wc := &v1alpha1.WorkerCluster{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: rem.name}, wc); err != nil {
			return reconcile.Result{}, fmt.Errorf("reading WorkerCluster %s: %w", rem.name, err), false
		}
		var err error
		if desired, err = r.desiredMirror(job, wc); err != nil {
			r.refusals.remember(job, writeMirrorSpec)
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidMirror, writeMirrorSpec.action, "cannot carry the new spec to the mirror on %s: %v", rem.name, err)
			return reconcile.Result{}, nil, false
		}
	}
	updated, changed := mirror.SpecUpdate(desired, m)
	if len(changed) == 0 {
		return reconcile.Result{}, nil, false
	}
	if err := rem.client().Update(ctx, updated); err != nil {
		if classify(err) == forbidden {
			r.Registry.recheckRights(ctx, rem.name)
		}
		result, err := r.refused(ctx, job, writeMirrorSpec, "carrying "+strings.Join(changed, ", ")+" to the mirror", workerAPI(rem.name), err)
		return result, err, false
	}
	if slices.Contains(changed, "suspend") {
		// KEP-2232: the worker deletes or recreates the pods and reports
		// Suspended and startTime, which the status copy brings back.
		reason, verb := ReasonMirrorResumed, "resumed"
		if ptr.Deref(updated.Spec.Suspend, false) {
			reason, verb = ReasonMirrorSuspended, "suspended"
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, reason, "Suspend", "mirror on %s %s", rem.name, verb)
		changed = slices.DeleteFunc(changed, func(f string) bool { return f == "suspend" })
	}
	if len(changed) > 0 {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonMirrorUpdated, writeMirrorSpec.action, "carried %s to the mirror on %s", strings.Join(changed, ", "), rem.name)
	}
	return reconcile.Result{}, nil, true
}

// recordInjected notes on the manager Job which directives went into its
// mirror only, so the user can see how the pods were steered.
func (r *JobReconciler) recordInjected(ctx context.Context, job *batchv1.Job, directives v1alpha1.SchedulingDirectives) error {
	data, err := json.Marshal(directives)
	if err != nil {
		return err
	}
	updated := job.DeepCopy()
	metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.InjectedDirectivesAnnotation, string(data))
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("recording the directives injected into the mirror: %w", err)
	}
	*job = *updated
	return nil
}

// conflict: a same-named Job jobferry did not create exists on the worker. It
// is left alone; the manager Job is placed again, elsewhere.
func (r *JobReconciler) conflict(ctx context.Context, job *batchv1.Job, worker string) error {
	dispatchTotal.WithLabelValues(worker, "conflict").Inc()
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonNameConflict, "Dispatch",
		"a Job %s/%s not created by jobferry exists on %s; it is left untouched and this Job is placed elsewhere", job.Namespace, job.Name, worker)
	exclude := func(updated *batchv1.Job) {
		excluded := slices.DeleteFunc(strings.Split(job.Annotations[v1alpha1.ExcludedWorkersAnnotation], ","), func(s string) bool { return s == "" })
		updated.Annotations[v1alpha1.ExcludedWorkersAnnotation] = strings.Join(append(excluded, worker), ",")
	}
	if err := r.release(ctx, job, worker, exclude); err != nil {
		return fmt.Errorf("releasing placement on %s: %w", worker, err)
	}
	return nil
}

// workerDown decides what happens to a Job whose worker is not connected:
// nothing until the worker has been disconnected for WorkerLostTimeout (a
// transient blip must not rerun anything), then a re-dispatch with the next
// attempt — unless the Job asked to wait for its worker. The mirror left on
// the lost worker is fenced: its status is never read again, and the
// collector deletes it when the worker returns.
func (r *JobReconciler) workerDown(ctx context.Context, job *batchv1.Job, worker string) (reconcile.Result, error) {
	if isFinished(job) {
		if controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
			// Only the finished mirror is left to delete, once the worker answers.
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
		return reconcile.Result{}, nil
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: worker}, wc); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	down := time.Duration(0)
	if cond := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected); cond != nil && cond.Status != metav1.ConditionTrue {
		down = r.Clock.Since(cond.LastTransitionTime.Time)
	} else if wc.Name == "" {
		down = r.WorkerLostTimeout // the WorkerCluster is gone for good
	}
	if down < r.WorkerLostTimeout {
		requeue := reconcile.Result{RequeueAfter: min(r.WorkerLostTimeout-down+time.Second, 10*time.Second)}
		if needsActivation(job) {
			// Placed, but nothing runs yet: say what it waits for.
			return requeue, r.showWaiting(ctx, job, waitingForMirror(worker, "the worker cluster is not connected; after %s it is placed elsewhere", r.WorkerLostTimeout))
		}
		return requeue, nil
	}
	if job.Annotations[v1alpha1.OnWorkerLostAnnotation] == v1alpha1.OnWorkerLostWait {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonWorkerLost, "Redispatch",
			"worker %s has been unreachable for %s; this Job asks to wait for it (%s: %s) and is not run elsewhere",
			worker, down.Round(time.Second), v1alpha1.OnWorkerLostAnnotation, v1alpha1.OnWorkerLostWait)
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	if err := r.release(ctx, job, worker, nil); err != nil {
		return r.refused(ctx, job, writeJob, "releasing the placement on lost worker "+worker, managerAPI, err)
	}
	dispatchTotal.WithLabelValues(worker, "lost").Inc()
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonWorkerLost, "Redispatch",
		"worker %s has been unreachable for %s; dispatching attempt %d elsewhere (the mirror left there is deleted when it returns)",
		worker, down.Round(time.Second), attemptOf(job)+1)
	return reconcile.Result{}, nil
}

// attemptOf is the dispatch attempt recorded on a manager Job or mirror.
func attemptOf(obj metav1.Object) int {
	if n, err := strconv.Atoi(obj.GetAnnotations()[v1alpha1.DispatchAttemptAnnotation]); err == nil {
		return n
	}
	n, _ := strconv.Atoi(obj.GetLabels()[v1alpha1.DispatchAttemptLabel])
	return n
}

// wroteFinished: this manager wrote the Job's finished status (which the
// cache may not show yet).
func (r *JobReconciler) wroteFinished(job *batchv1.Job) bool {
	uid, ok := r.finished.Load(client.ObjectKeyFromObject(job))
	return ok && uid.(types.UID) == job.UID
}

// needsActivation: placed and mirrored, but still held by the webhook.
func needsActivation(job *batchv1.Job) bool {
	return job.Annotations[v1alpha1.HeldForPlacementAnnotation] == "true"
}

// userSuspended: suspended by its user rather than held for placement.
func userSuspended(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false) && !needsActivation(job)
}

// activate writes the worker's directives into the manager Job's template
// (KEP-2926: allowed while suspended and not started) and unsuspends it, in
// one update, so the user sees where and how the Job runs. When the template
// is no longer mutable the directives went into the mirror only, and the
// annotation records them.
func (r *JobReconciler) activate(ctx context.Context, job *batchv1.Job, worker string) error {
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
		return fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	updated := job.DeepCopy()
	merged, err := dispatch.MergeDirectives(updated.Spec.Template, wc.Spec.Scheduling)
	if err == nil && mirror.TemplateMutable(job) {
		updated.Spec.Template = merged
	} else if data, jerr := json.Marshal(wc.Spec.Scheduling); jerr == nil {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.InjectedDirectivesAnnotation, string(data))
	}
	updated.Spec.Suspend = ptr.To(false)
	delete(updated.Annotations, v1alpha1.HeldForPlacementAnnotation)
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("injecting %s's directives and unsuspending: %w", worker, err)
	}
	*job = *updated
	return nil
}

func (r *JobReconciler) copyStatus(ctx context.Context, job *batchv1.Job, m *batchv1.Job, worker string) error {
	desired := mirror.Status(job, m.Status)
	key := client.ObjectKeyFromObject(job)
	observed, hadObserved := r.Registry.takeObserved(key)
	if equality.Semantic.DeepEqual(desired, job.Status) {
		return nil
	}
	updated := job.DeepCopy()
	updated.Status = desired
	err := r.Client.Status().Update(ctx, updated)
	switch {
	case err == nil:
		statusSyncTotal.WithLabelValues(worker, "written").Inc()
		if hadObserved {
			statusSyncLag.Observe(r.Clock.Since(observed).Seconds())
		}
		if mirror.Finished(desired) != isFinished(job) || (desired.Active > 0) != (job.Status.Active > 0) {
			r.Registry.jobsChanged(worker) // DISPATCHED and RUNNING of the worker
		}
		if mirror.Finished(desired) {
			r.finished.Store(client.ObjectKeyFromObject(job), job.UID)
		}
		job.Status = updated.Status
		job.ResourceVersion = updated.ResourceVersion
		return nil
	case apierrors.IsInvalid(err):
		statusSyncTotal.WithLabelValues(worker, "rejected").Inc()
		for _, field := range mirror.RejectedFields(err) {
			statusWriteRejected.WithLabelValues(field).Inc()
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonStatusRejected, "SyncStatus", "the API server rejected the status copied from %s: %v", worker, err)
		logf.FromContext(ctx).Error(err, "status copy rejected", "worker", worker)
		return nil
	default:
		if hadObserved {
			r.Registry.observed.LoadOrStore(key, observed)
		}
		result := "error"
		if apierrors.IsConflict(err) {
			result = "conflict"
		}
		statusSyncTotal.WithLabelValues(worker, result).Inc()
		return fmt.Errorf("copying status from %s: %w", worker, err)
	}
}

// finalize deletes the mirror of a manager Job being deleted, then lets it go.
func (r *JobReconciler) finalize(ctx context.Context, job *batchv1.Job) error {
	defer r.assume.forget(job.UID)
	defer r.refusals.forget(client.ObjectKeyFromObject(job))
	defer r.finished.Delete(client.ObjectKeyFromObject(job))
	defer r.Registry.jobsChanged(job.Annotations[v1alpha1.WorkerAnnotation])
	if !controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
		return nil
	}
	if worker := job.Annotations[v1alpha1.WorkerAnnotation]; worker != "" {
		rem := r.Registry.remote(worker)
		if rem != nil && rem.connected() {
			m, err := rem.mirror(ctx, client.ObjectKeyFromObject(job))
			if err != nil {
				return err
			}
			if m != nil && mirror.IsMirrorOf(m, r.Origin, job.UID) && m.DeletionTimestamp == nil {
				if err := deleteMirror(ctx, rem, m); err != nil {
					return err
				}
			}
		} else {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonMirrorLeftOnWorker, "Delete",
				"worker %s is not connected; its mirror is removed by garbage collection once it is back", worker)
		}
	}
	return r.removeFinalizer(ctx, job)
}

func (r *JobReconciler) removeFinalizer(ctx context.Context, job *batchv1.Job) error {
	if !controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
		return nil
	}
	updated := job.DeepCopy()
	controllerutil.RemoveFinalizer(updated, v1alpha1.MirrorFinalizer)
	if err := r.Client.Update(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// deleteMirror deletes exactly this mirror (UID precondition) and, through
// background propagation, its pods.
func deleteMirror(ctx context.Context, rem *remote, m *batchv1.Job) error {
	err := rem.client().Delete(ctx, m, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &m.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting mirror %s/%s on %s: %w", m.Namespace, m.Name, rem.name, err)
	}
	return nil
}

func isManagerJob(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.ManagedBy, "") == v1alpha1.ManagerManagedBy
}

func isFinished(job *batchv1.Job) bool { return mirror.Finished(job.Status) }

func hasTrueCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return mirror.ConditionTrue(job.Status, t)
}
