package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// Event reasons on manager Jobs.
const (
	// ReasonDispatched: placed on a worker, and its mirror created there.
	ReasonDispatched         = "Dispatched"
	ReasonUnschedulable      = "Unschedulable"
	ReasonInvalidSelector    = "InvalidClusterSelector"
	ReasonNameConflict       = "NameConflict"
	ReasonStatusRejected     = "StatusRejected"
	ReasonMirrorLeftOnWorker = "MirrorLeftOnWorker"
	ReasonMirrorSuspended    = "MirrorSuspended"
	ReasonMirrorResumed      = "MirrorResumed"
	ReasonMirrorUpdated      = "MirrorUpdated"
	ReasonWorkerLost         = "WorkerLost"
	ReasonMissingRights      = "WorkerMissingRights"
	ReasonInvalidMirror      = "InvalidMirror"
	// ReasonUntrustedState: jobferry's annotations on the Job are not what
	// its manager wrote; nothing is done for the Job.
	ReasonUntrustedState = "UntrustedState"
	// ReasonStrayMirror: a mirror of the Job that its state does not
	// account for runs on a worker; nothing is dispatched meanwhile.
	ReasonStrayMirror = "StrayMirror"
	// ReasonMirrorNotOurs: the Job in the mirror's place on the worker is
	// not the one jobferry created; the Job is dispatched again.
	ReasonMirrorNotOurs = "MirrorReplacedOnWorker"
	// ReasonMirrorDeleted: the mirror was deleted on the worker; the Job is
	// dispatched again.
	ReasonMirrorDeleted = "MirrorDeletedOnWorker"
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

// JobReconciler dispatches manager Jobs: it places an unplaced Job, injecting
// the worker's directives and unsuspending it in the same update (recorded
// before anything exists on the worker), creates its mirror, carries later
// spec changes to the mirror, copies the mirror's status back, and deletes
// the mirror once its final status is copied or the manager Job is gone.
// What to do next is decided by nextStep (step.go), a pure function of what
// the reconcile read; the reconciler reads, asks, writes (apply: one
// handler per kind of step), and asks again. A Job with nothing to run it
// completes itself (nothingtorun.go); one that waits shows why in its
// Suspended condition (waitingcondition.go); a write the API server refuses
// becomes a Warning Event on the Job (refusals.go). What it is told of the
// workers arrives through its subscription to the pool (jobevents.go).
type JobReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Workers are the connections to the worker clusters (workers.Pool),
	// and what the Job controller is told of them.
	Workers Workers
	Origin  string
	// ManagerID identifies this installation on the workers
	// (InstallationID), on every mirror it creates.
	ManagerID string
	// Policy says which Jobs may be dispatched, and where (tenancy).
	Policy *admission.DispatchPolicy
	// Keys gives the key that seals jobferry's state on manager Jobs
	// (StateKeys; package jobstate).
	Keys keySource
	// APIReader reads from the manager cluster's API server what the cache
	// does not know yet (a namespace created moments before its Job).
	APIReader client.Reader
	Clock     clock.Clock
	// Concurrency is the number of Jobs reconciled at once.
	Concurrency int
	// WorkerLostTimeout is how long a worker may stay disconnected before its
	// unfinished Jobs are dispatched elsewhere.
	WorkerLostTimeout time.Duration
	// StatusBatchPeriod is how long changes of a running mirror are
	// gathered into one status copy; a final status is copied at once.
	StatusBatchPeriod time.Duration
	// DeleteFinishedMirrors deletes finished mirrors once their final status
	// is copied, rather than when their manager Job is deleted (see
	// stepConfig).
	DeleteFinishedMirrors bool
	// CapacitySettle is how long after a mirror's pods run a capacity
	// summary is trusted to include them (see assumeCache).
	CapacitySettle time.Duration

	// jobEvents and mirrorEvents feed the work queue (jobevents.go): the
	// Jobs to look at again, and those whose mirror changed, ahead of the
	// others (statusPriority). wakeSignal asks for a wake-up of the Jobs
	// in the waiting room; warnings carries the workers' Warning Events to
	// the forwarding loop (workerwarnings.go).
	jobEvents, mirrorEvents chan event.GenericEvent
	wakeSignal              chan struct{}
	warnings                chan workers.Warning

	// assume holds what placed Jobs request until the workers' summaries
	// show it: placement adds, mirrors running and summaries end it.
	assume *assumeCache
	// waiting holds the Jobs no worker had room for (waitingroom.go).
	waiting *waitingRoom
	// observed: when the mirror changes not copied yet were seen.
	observed observedMemo
	// refusals remembers writes the API server rejected, so they are not
	// retried until the Job changes.
	refusals *refusalMemo
	// warned remembers which worker Warning Events were forwarded to which
	// Jobs, so each reason is forwarded once per pod (workerwarnings.go).
	warned *warnedMemo
	// removed: since when the WorkerClusters of Jobs placed on deleted
	// workers are known to be gone.
	removed removedWorkers
	// finished: the Jobs whose finished status this manager wrote.
	finished finishedMemo
	// attempts remembers the attempts this manager placed and the mirrors
	// it created for them until the worker's cache shows them recorded
	// (like the expectations of upstream controllers): a reconcile in
	// between must not create the mirror again, nor take someone else's Job
	// for it.
	attempts attemptMemo
	// placeMu serialises placement, so two Jobs never both take the same
	// free capacity.
	placeMu sync.Mutex
}

// SetupWithManager registers the controller: manager Jobs, plus the keys its
// subscription to the pool yields when mirrors, capacity or workers
// change (jobevents.go).
func (r *JobReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	if err := crmetrics.Registry.Register(newJobsCollector(mgr.GetClient(), r.Workers.Connected)); err != nil {
		return fmt.Errorf("registering jobferry_jobs: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("job").
		For(&batchv1.Job{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			job, ok := obj.(*batchv1.Job)
			return ok && v1alpha1.IsManagerJob(job)
		}), notOwnStatusWrite{})).
		WatchesRawSource(source.Channel(r.jobEvents, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.mirrorEvents, enqueueWithPriority(statusPriority))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(r); err != nil {
		return err
	}
	// Like the controller, the wake-up and the forwarding of the workers'
	// Warning Events run on the leader only.
	if err := mgr.Add(manager.RunnableFunc(r.wakeLoop)); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(r.forwardLoop))
}

// init completes the reconciler: its memories and event sources, its
// subscription to the pool.
func (r *JobReconciler) init() {
	r.Recorder = eventnote.Bound(r.Recorder)
	r.assume = newAssumeCache(r.Clock, r.CapacitySettle)
	r.waiting = newWaitingRoom()
	r.refusals = newRefusalMemo()
	r.warned = newWarnedMemo(r.Clock)
	r.jobEvents = make(chan event.GenericEvent, jobEventBuffer)
	r.mirrorEvents = make(chan event.GenericEvent, jobEventBuffer)
	// One pending signal is enough: a wake-up reads everything afresh.
	r.wakeSignal = make(chan struct{}, 1)
	r.warnings = make(chan workers.Warning, 1024)
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
// nextStep what to do, does it, and asks again with what it wrote, until a
// step has to wait for the clusters' answer.
func (r *JobReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		job = nil
		r.warned.forget(req.NamespacedName)
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
		st := nextStep(s, r.stepConfig())
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

func (r *JobReconciler) stepConfig() stepConfig {
	return stepConfig{Origin: r.Origin, ManagerID: r.ManagerID, WorkerLostTimeout: r.WorkerLostTimeout, StatusBatchPeriod: r.StatusBatchPeriod, DeleteFinishedMirrors: r.DeleteFinishedMirrors}
}

// readState reads, from caches, what nextStep decides on: the Job (nil when
// gone), its worker's connection, WorkerCluster and mirror, and what this
// manager remembers of it.
func (r *JobReconciler) readState(ctx context.Context, key types.NamespacedName, job *batchv1.Job, memo *stepMemo) (jobState, error) {
	s := jobState{Job: job, Now: r.Clock.Now(), Foreign: memo.foreign}
	if job == nil {
		return s, nil
	}
	sealKey, err := r.Keys.Key(ctx)
	if err != nil {
		return s, err
	}
	s.Blocked = map[write]bool{}
	for _, w := range []write{writePlacement, writeMirror, writeNamespace, writeMirrorSpec, writeJob, noticeUntrusted, noticeStray} {
		if r.refusals.blocked(job, w) {
			s.Blocked[w] = true
		}
	}
	switch verdict, names := jobstate.Verify(job, sealKey); verdict {
	case jobstate.Tampered:
		// Nothing more is read: nothing is decided from this state.
		s.Untrusted = names
		return s, nil
	case jobstate.Legacy:
		s.Legacy = true
		return s, nil
	}
	s.WroteFinished = r.wroteFinished(job)
	s.Worker = job.Annotations[v1alpha1.WorkerAnnotation]
	s.MirrorUID = types.UID(job.Annotations[v1alpha1.MirrorUIDAnnotation])
	attempt, placedHere := r.attempts.of(job)
	s.CreatedMirrorUID = attempt.mirrorUID
	// A leader that took over from one that died between creating a mirror
	// and recording its UID finds it unrecorded, of an attempt it did not
	// place itself: it takes the one it finds, as it does for Jobs placed
	// before the key (their managers recorded no UIDs). An attempt this
	// manager placed has no mirror but the one it creates.
	s.AdoptMirror = !placedHere || jobstate.PredatesKey(job, sealKey)
	unfinished := !isFinished(job) && !nothingToRun(job)
	if s.Worker == "" {
		if unfinished {
			if _, s.Refusal, err = r.admit(ctx, job); err != nil {
				return s, err
			}
			if s.Stray, err = r.strayMirror(ctx, job); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: s.Worker}, wc); err == nil {
		s.WorkerCluster = wc
	} else if apierrors.IsNotFound(err) {
		s.WorkerGoneSince = r.removed.since(s.Worker, r.Clock.Now())
	} else {
		return s, fmt.Errorf("reading WorkerCluster %s: %w", s.Worker, err)
	}
	conn := r.conn(s.Worker)
	if conn == nil || !conn.Connected() {
		return s, nil
	}
	s.Connection = connectionState{Connected: true, Namespaces: conn.AllowedNamespaces(), MayUse: conn.MayUse(job.Namespace), MissingRights: conn.MissingRights()}
	m, err := conn.Mirror(ctx, key)
	if err != nil {
		return s, err
	}
	if m != nil && !mirror.IsMirrorOf(m, r.Origin, job.UID) && !workers.MayDelete(m, r.ManagerID, conn.OriginShared()) {
		// Another installation's mirror of the same name (or one that
		// may be): not ours to fence, so a Job not ours holds the name.
		s.Foreign, m = m, nil
	}
	s.Mirror = m
	s.MirrorExpected = m == nil && r.mirrorExpected(job, s.Now)
	if m != nil && m.UID == s.MirrorUID {
		r.attempts.forget(key)
	}
	s.MirrorChangeSeen = r.observed.since(key)
	if !unfinished || s.WorkerCluster == nil || (m != nil && !mirror.TemplateMutable(m)) {
		return s, nil
	}
	// A mirror may be created, or a changed template carried to it.
	ns, refusal, err := r.admit(ctx, job)
	if err != nil {
		return s, err
	}
	s.Refusal = refusal
	if m == nil {
		if s.Stray, err = r.strayMirror(ctx, job); err != nil {
			return s, err
		}
	}
	s.WorkerRejects, err = r.workerRejects(ctx, job, ns, s.WorkerCluster, conn)
	return s, err
}

// admit reads the Job's namespace and applies the dispatch policy. The
// webhook applies it at creation; this catches Jobs created while it was
// down or not registered, namespaces changed since, and templates changed
// since (while suspended): it holds at every placement, mirror create and
// template carry, which is where readState asks.
func (r *JobReconciler) admit(ctx context.Context, job *batchv1.Job) (*corev1.Namespace, *admission.Refusal, error) {
	ns, err := r.namespaces().Get(ctx, job.Namespace)
	if err != nil {
		return nil, nil, err
	}
	_, refusal := r.Policy.Admit(job, ns)
	return ns, refusal, nil
}

// strayMirror finds, on the connected workers, a mirror of the Job of a
// later attempt than the Job records that this manager did not just create:
// the Job's state does not account for it.
func (r *JobReconciler) strayMirror(ctx context.Context, job *batchv1.Job) (*strayMirror, error) {
	key := client.ObjectKeyFromObject(job)
	recorded := jobstate.Attempt(job)
	for _, worker := range r.Workers.Names() {
		conn := r.conn(worker)
		if conn == nil || !conn.Connected() || !conn.MayUse(job.Namespace) {
			continue
		}
		m, err := conn.Mirror(ctx, key)
		if err != nil {
			return nil, err
		}
		if m == nil || m.DeletionTimestamp != nil || !mirror.IsMirrorOf(m, r.Origin, job.UID) || mirror.Attempt(m) <= recorded {
			continue
		}
		if created, ok := r.attempts.of(job); ok && created.mirrorUID == m.UID {
			continue
		}
		return &strayMirror{Worker: worker, Attempt: mirror.Attempt(m), UID: m.UID}, nil
	}
	return nil, nil
}

// workerRejects says why the Job's worker may not run its pods as they are
// now ("" when it may): what placement checked that depends neither on free
// capacity nor on the worker taking new Jobs (dispatch.Admits), the worker's
// namespace included.
func (r *JobReconciler) workerRejects(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace, wc *v1alpha1.WorkerCluster, conn workers.Conn) (string, error) {
	if !conn.MayUse(job.Namespace) {
		return "", nil // nextStep releases it, saying why
	}
	view := dispatch.Worker{Name: wc.Name, Labels: wc.Labels, Connected: true, Namespaces: wc.Spec.Namespaces, Directives: wc.Spec.Scheduling}
	if capacity := conn.Capacity(ctx); capacity != nil {
		view.Pools = capacity.Pools
		if view.Pools == nil {
			view.Pools = []v1alpha1.NodePool{}
		}
	}
	verdict, err := r.workerNamespaceVerdict(ctx, ns, conn, wc.Name, job.Namespace)
	if err != nil {
		return "", err
	}
	view.Namespace = verdict
	_, why := dispatch.Admits(job, view)
	return why, nil
}

// workerNamespaceVerdict says why the worker's namespace of the Job's name
// may not take its pods: it enforces a weaker Pod Security level than the
// manager's namespace, it is missing and the manager may not create it, or
// the credential may not read it (the worker's rights are checked again at
// once). An error is one worth retrying.
func (r *JobReconciler) workerNamespaceVerdict(ctx context.Context, managerNS *corev1.Namespace, conn workers.Conn, worker, name string) (dispatch.NamespaceVerdict, error) {
	workerNS, err := conn.Namespace(ctx, name)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		r.Workers.RightsRefused(worker)
		return dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceUnreadable, Why: fmt.Sprintf("its credential may not read namespace %s there: %s (see the WorkerCluster's %s condition)",
			name, apiMessage(err), v1alpha1.ConditionAuthorized)}, nil
	case err != nil:
		return dispatch.NamespaceVerdict{}, err
	}
	// As the namespace will be when the mirror is written: jobferry creates
	// it, or brings the labels of one it created in step, first.
	rights := conn.NamespaceRights()
	plan := planWorkerNamespace(name, workerNS, podSecurityLabels(managerNS), r.ManagerID, rights)
	if plan.action == namespaceMissing {
		return dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceMissing, Why: fmt.Sprintf("namespace %s does not exist there, and the manager does not create namespaces there", name)}, nil
	}
	why := r.Policy.WorkerNamespaceRejects(managerNS, plan.namespace)
	if why == "" {
		return dispatch.NamespaceVerdict{}, nil
	}
	if plan.ours && rights.Create && !rights.Relabel {
		why += fmt.Sprintf("; jobferry created it, but its credential there may not %s to bring its Pod Security labels in step with the manager's (the worker chart grants it with managerIdentity.allowNamespaceCreation)", workers.RelabelNamespacesRight)
	}
	return dispatch.NamespaceVerdict{Code: dispatch.ReasonPodSecurity, Why: why}, nil
}

// prepareWorkerNamespace leaves the worker's namespace of a Job as
// planWorkerNamespace decides (created, or its Pod Security labels set to
// the manager namespace's), before a mirror is created or its pod template
// changed there.
func (r *JobReconciler) prepareWorkerNamespace(ctx context.Context, conn workers.Conn, managerNS *corev1.Namespace, name string) error {
	// Twice at most: a namespace someone made between the read and the
	// create is read again and planned as found.
	for range 2 {
		have, err := conn.Namespace(ctx, name)
		if err != nil {
			return err
		}
		plan := planWorkerNamespace(name, have, podSecurityLabels(managerNS), r.ManagerID, conn.NamespaceRights())
		switch plan.action {
		case namespaceCreate:
			created, err := conn.CreateNamespace(ctx, plan.namespace)
			if err != nil || created {
				return err
			}
		case namespaceRelabel:
			return conn.RelabelNamespace(ctx, have, plan.namespace)
		default:
			return nil
		}
	}
	return nil
}

// place chooses a worker for the Job and records it, with the worker's
// directives and the Job unsuspended, in one write (placedJob). placed
// reports a placement recorded: the mirror can be created next.
func (r *JobReconciler) place(ctx context.Context, job *batchv1.Job, memo *stepMemo) (placed bool, result reconcile.Result, err error) {
	ns, err := r.namespaces().Get(ctx, job.Namespace)
	if err != nil {
		return false, reconcile.Result{}, err
	}
	// Worker namespaces are read now, not under the placement lock.
	r.Workers.ReadNamespaces(ctx, job.Namespace)
	// A wake-up that starts from here on may not see this Job waiting yet.
	pass := r.waiting.pass()
	asWritten := asUserWroteIt(job)
	decision, invalid, err := r.decide(ctx, asWritten, ns)
	if err != nil {
		return false, reconcile.Result{}, err
	}
	for worker, code := range decision.Codes {
		metrics.PlacementRejections.WithLabelValues(worker, code).Inc()
	}
	if invalid != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidSelector, "Place", "%v", invalid)
		return false, reconcile.Result{}, r.showWaiting(ctx, job, waitingForWorker(ReasonInvalidClusterSelector, "%v", invalid))
	}
	if !decision.Placed() {
		metrics.DispatchTotal.WithLabelValues("", "unschedulable").Inc()
		// It waits in the room, woken when capacity or a worker change
		// gives it room; the requeue is a safety net.
		if missed := r.waiting.add(asWritten, pass); missed {
			r.wakeWaiting()
		}
		retry := reconcile.Result{RequeueAfter: 5 * time.Minute}
		// The condition says the gist (no free amounts, which change with
		// every capacity summary); the Event, with the figures, goes with a
		// change of it, not with every retry: under load every capacity
		// change retries every waiting Job.
		wrote, err := r.updateWaiting(ctx, job, waitingForWorker(ReasonNoWorkerFits, "%s", decision.Gist()))
		if wrote {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonUnschedulable, "Place", "%s", decision.Summary())
		}
		return false, retry, err
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: decision.Worker}, wc); err != nil {
		r.assume.forget(job.UID)
		return false, reconcile.Result{}, fmt.Errorf("reading WorkerCluster %s: %w", decision.Worker, err)
	}
	updated, err := placedJob(job, decision.Worker, wc.Spec.Scheduling)
	if err == nil {
		err = r.writeJob(ctx, updated)
	}
	if err != nil {
		r.assume.forget(job.UID)
		if reported(err) {
			if werr := r.showWaiting(ctx, job, waitingForWorker(ReasonWaitingForWorker, "recording the placement on %s was refused: %s", decision.Worker, apiMessage(err))); werr != nil {
				return false, reconcile.Result{}, werr
			}
		}
		result, err := r.refused(ctx, job, writePlacement, "recording the placement on "+decision.Worker, managerAPI, err)
		return false, result, err
	}
	*job = *updated
	r.attempts.placed(job)
	r.waiting.remove(client.ObjectKeyFromObject(job))
	memo.placement = decision.Summary()
	return true, reconcile.Result{}, nil
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
		r.assume.assume(job.UID, client.ObjectKeyFromObject(job), decision.Worker, decision.Pool, decision.Request)
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
	views := make([]dispatch.Worker, 0, len(list.Items))
	for _, wc := range list.Items {
		view := dispatch.Worker{
			Name: wc.Name, Labels: wc.Labels, Cordoned: wc.Spec.Cordoned, Namespaces: wc.Spec.Namespaces,
			Directives: wc.Spec.Scheduling, Assumed: r.assume.assumed(wc.Name),
		}
		if conn := r.conn(wc.Name); conn != nil && conn.Connected() {
			view.Connected = true
			if capacity := conn.Capacity(ctx); capacity != nil {
				view.Pools = capacity.Pools
				if view.Pools == nil {
					view.Pools = []v1alpha1.NodePool{}
				}
			}
			if missing := conn.MissingRights(); len(missing) > 0 {
				view.MissingRights = workers.MissingMessage(missing)
			}
			if conn.MayUse(job.Namespace) {
				verdict, err := r.workerNamespaceVerdict(ctx, ns, conn, wc.Name, job.Namespace)
				if err != nil {
					// This worker alone is left out of this placement.
					verdict = dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceUnreadable, Why: fmt.Sprintf("reading namespace %s there failed: %v", job.Namespace, err)}
				}
				view.Namespace = verdict
			}
		}
		views = append(views, view)
	}
	return views, nil
}

// createMirror creates the mirror on the Job's worker (and its namespace,
// when the manager may create namespaces there). A same-named Job that is
// not ours is handed back to nextStep as Foreign.
func (r *JobReconciler) createMirror(ctx context.Context, s jobState, memo *stepMemo) (created bool, result reconcile.Result, err error) {
	job, worker := s.Job, s.Worker
	conn := r.conn(worker)
	if conn == nil {
		return false, reconcile.Result{Requeue: true}, nil
	}
	if conn.NamespaceRights().Create {
		ns, err := r.namespaces().Get(ctx, job.Namespace)
		if err != nil {
			return false, reconcile.Result{}, err
		}
		// The worker's Pod Security admission holds the mirror's pods to
		// the manager namespace's levels.
		if err := r.prepareWorkerNamespace(ctx, conn, ns, job.Namespace); err != nil {
			result, err := r.mirrorRefused(ctx, job, writeNamespace, "preparing namespace "+job.Namespace, worker, err)
			return false, result, err
		}
	}
	m, err := desiredMirror(job, s.WorkerCluster, r.Origin, r.ManagerID)
	if err != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonInvalidMirror, "CreateMirror", "cannot build the mirror for %s: %v", worker, err)
		return false, reconcile.Result{}, r.showWaiting(ctx, job, waitingForMirror(ReasonWaitingForMirror, worker, "cannot build its mirror: %v", err))
	}
	err = conn.Client().Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := conn.UncachedJob(ctx, client.ObjectKeyFromObject(m))
		if getErr != nil {
			return false, reconcile.Result{}, fmt.Errorf("reading the Job %s/%s that exists on %s: %w", m.Namespace, m.Name, worker, getErr)
		}
		if mirror.IsMirrorOf(existing, r.Origin, job.UID) && mirror.Attempt(existing) == mirror.Attempt(m) &&
			(existing.UID == s.MirrorUID || existing.UID == s.CreatedMirrorUID || s.AdoptMirror) {
			// Ours, created earlier; the cache has not caught up yet.
			return false, reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		if mirror.IsMirrorOf(existing, r.Origin, job.UID) && mirror.Attempt(existing) < mirror.Attempt(m) {
			// A stale attempt the cache does not show yet: fenced, as the
			// next step would once it does.
			if _, err := workers.DeleteMirror(ctx, conn, worker, existing); err != nil {
				result, err := r.refused(ctx, job, writeMirrorGone, "deleting the mirror of an earlier attempt", workerAPI(worker), err)
				return false, result, err
			}
			return false, reconcile.Result{RequeueAfter: time.Second}, nil
		}
		// Whatever its labels say: a Job jobferry did not create (or its
		// copy, made in the moment before this create).
		memo.foreign = existing
		return false, reconcile.Result{}, errForeign
	}
	if namespaceGone(err) {
		// Deleted on the worker since the manager last saw it (its mirrors
		// with it): read, and created, again on the next try.
		conn.ForgetNamespace(job.Namespace)
		metrics.DispatchTotal.WithLabelValues(worker, "error").Inc()
		return false, reconcile.Result{RequeueAfter: 2 * time.Second}, r.showWaiting(ctx, job, waitingForMirror(ReasonWaitingForMirror, worker,
			"its namespace %s there is gone or being deleted; the mirror is created once jobferry has created it again (or, where it may not create namespaces, once someone has)", job.Namespace))
	}
	if err != nil {
		metrics.DispatchTotal.WithLabelValues(worker, "error").Inc()
		result, err := r.mirrorRefused(ctx, job, writeMirror, "creating the mirror", worker, err)
		return false, result, err
	}
	metrics.DispatchTotal.WithLabelValues(worker, "created").Inc()
	r.attempts.created(job, m.UID, r.Clock.Now())
	attempt := max(jobstate.Attempt(job), 1)
	if attempt <= 1 {
		metrics.DispatchDuration.Observe(r.Clock.Since(job.CreationTimestamp.Time).Seconds())
	}
	// One Event per dispatch: where, why there, and the mirror made.
	placement := memo.placement
	if placement == "" {
		placement = "placed on " + worker
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonDispatched, "Dispatch", "%s; created its mirror there (attempt %d)", placement, attempt)
	// The mirror's status comes with its first event; the Suspended
	// condition the Job may show while it waited is replaced then.
	return true, reconcile.Result{}, nil
}

// namespaceGone: a create was refused because its namespace does not exist,
// or is being deleted.
func namespaceGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// errForeign: creating the mirror found a same-named Job jobferry did not
// create (stepMemo.foreign); nextStep decides what follows.
var errForeign = errors.New("a Job not created by jobferry holds the name")

// mirrorRefused reports a refused write on the worker for a Job that has no
// mirror yet: on the Job (Event and Suspended condition), and, when the
// worker refused it as forbidden, by checking the worker's rights at once, so
// that a credential lacking them releases the Job for another worker.
func (r *JobReconciler) mirrorRefused(ctx context.Context, job *batchv1.Job, w write, what, worker string, err error) (reconcile.Result, error) {
	if reported(err) {
		if werr := r.showWaiting(ctx, job, waitingForMirror(ReasonWaitingForMirror, worker, "%s was refused: %s", what, apiMessage(err))); werr != nil {
			return reconcile.Result{}, werr
		}
	}
	result, rerr := r.refused(ctx, job, w, what, workerAPI(worker), err)
	if classify(err) == forbidden {
		if missing := r.Workers.RecheckRights(ctx, worker); len(missing) > 0 {
			// The next step releases the Job for another worker.
			return reconcile.Result{Requeue: true}, nil
		}
	}
	return result, rerr
}

// release undoes the placement of a Job on worker, so it is placed again
// (releasedJob); change, when set, edits the Job in the same write. The Job
// object is updated with what was written.
func (r *JobReconciler) release(ctx context.Context, job *batchv1.Job, worker string, change func(*batchv1.Job)) error {
	updated := releasedJob(job)
	if change != nil {
		change(updated)
	}
	if err := r.writeJob(ctx, updated); err != nil {
		return err
	}
	r.assume.forget(job.UID)
	*job = *updated
	return nil
}

// updateMirror carries what the user changed on the running manager Job to
// its mirror (nextMirrorSpec decided what, from cached, the mirror as the
// cache keeps it: see slimMirror).
func (r *JobReconciler) updateMirror(ctx context.Context, job *batchv1.Job, worker string, cached *batchv1.Job, st step) (reconcile.Result, error) {
	conn := r.conn(worker)
	if conn == nil {
		return reconcile.Result{Requeue: true}, nil
	}
	if slices.Contains(st.Changed, "template") && conn.NamespaceRights().Create {
		// The new pods are held to the manager namespace's levels too.
		ns, err := r.namespaces().Get(ctx, job.Namespace)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.prepareWorkerNamespace(ctx, conn, ns, job.Namespace); err != nil {
			return r.refused(ctx, job, writeNamespace, "preparing namespace "+job.Namespace, workerAPI(worker), err)
		}
	}
	err := updateFromCache(ctx, conn, cached, st.Mirror)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if err != nil {
		if classify(err) == forbidden {
			r.Workers.RecheckRights(ctx, worker)
		}
		return r.refused(ctx, job, writeMirrorSpec, "carrying "+strings.Join(st.Changed, ", ")+" to the mirror", workerAPI(worker), err)
	}
	changed := st.Changed
	if slices.Contains(changed, "suspend") {
		// KEP-2232: the worker deletes or recreates the pods and reports
		// Suspended and startTime, which the status copy brings back.
		reason, verb := ReasonMirrorResumed, "resumed"
		if ptr.Deref(st.Mirror.Spec.Suspend, false) {
			reason, verb = ReasonMirrorSuspended, "suspended"
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, reason, "Suspend", "mirror on %s %s", worker, verb)
		changed = slices.DeleteFunc(slices.Clone(changed), func(f string) bool { return f == "suspend" })
	}
	if len(changed) > 0 {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonMirrorUpdated, writeMirrorSpec.action, "carried %s to the mirror on %s", strings.Join(changed, ", "), worker)
	}
	// The worker's answer to the new spec comes with the mirror's next event.
	return reconcile.Result{}, nil
}

// updateFromCache writes to the worker the changes that make cached (the
// mirror as the worker's cache keeps it, without what the manager never
// reads) into updated: applied onto the mirror as the worker has it now,
// read once, and written with that read's resourceVersion, so a change made
// meanwhile is a conflict, not lost. The manager's credential may get and
// update Jobs there; a spec change is rare enough for the read.
func updateFromCache(ctx context.Context, conn workers.Conn, cached, updated *batchv1.Job) error {
	patch, err := client.MergeFrom(cached).Data(updated)
	if err != nil {
		return err
	}
	current, err := conn.UncachedJob(ctx, client.ObjectKeyFromObject(cached))
	if err != nil {
		return err
	}
	if current.UID != cached.UID {
		return apierrors.NewConflict(batchv1.Resource("jobs"), cached.Name, fmt.Errorf("the mirror was replaced since it was read"))
	}
	original, err := json.Marshal(current)
	if err != nil {
		return err
	}
	merged, err := jsonpatch.MergePatch(original, patch)
	if err != nil {
		return err
	}
	next := &batchv1.Job{}
	if err := json.Unmarshal(merged, next); err != nil {
		return err
	}
	next.ResourceVersion = current.ResourceVersion
	if err := conn.Client().Update(ctx, next); err != nil {
		return err
	}
	*updated = *next
	return nil
}

// record writes jobferry's state on the Job, sealed: the UID of the mirror
// it created for the current attempt (when mirrorUID is set), or the state
// an earlier manager left unsealed. The Job object is updated with what was
// written.
func (r *JobReconciler) record(ctx context.Context, job *batchv1.Job, mirrorUID types.UID) error {
	updated := job.DeepCopy()
	if mirrorUID != "" {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.MirrorUIDAnnotation, string(mirrorUID))
	}
	if err := r.writeJob(ctx, updated); err != nil {
		return err
	}
	*job = *updated
	return nil
}

// writeJob updates a manager Job with its jobferry state sealed: every
// write of the Job by the manager goes through here, so what it leaves is
// always what Verify trusts.
func (r *JobReconciler) writeJob(ctx context.Context, job *batchv1.Job) error {
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return err
	}
	sealed := jobstate.Sealed(job, key)
	if err := r.Client.Update(ctx, sealed); err != nil {
		return err
	}
	*job = *sealed
	return nil
}

// wroteFinished: this manager wrote the Job's finished status (which the
// cache may not show yet).
func (r *JobReconciler) wroteFinished(job *batchv1.Job) bool {
	return r.finished.has(job)
}

// mirrorExpectedFor is how long a mirror this manager created is trusted to
// exist though the worker's cache does not show it yet.
const mirrorExpectedFor = 30 * time.Second

// mirrorExpected: this manager created the mirror of the Job's current
// attempt less than mirrorExpectedFor ago.
func (r *JobReconciler) mirrorExpected(job *batchv1.Job, now time.Time) bool {
	rec, ok := r.attempts.of(job)
	return ok && rec.mirrorUID != "" && now.Sub(rec.created) < mirrorExpectedFor
}

// needsActivation: placed and mirrored, but still held by the webhook.
func needsActivation(job *batchv1.Job) bool {
	return job.Annotations[v1alpha1.HeldForPlacementAnnotation] == "true"
}

// userSuspended: suspended by its user rather than held for placement.
func userSuspended(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false) && !needsActivation(job)
}

// activate injects the worker's directives into a Job that was placed but
// is still held (placed by an earlier version, which unsuspended after
// creating the mirror) and unsuspends it, in one update.
func (r *JobReconciler) activate(ctx context.Context, job *batchv1.Job, wc *v1alpha1.WorkerCluster) error {
	if wc == nil {
		return fmt.Errorf("WorkerCluster %s is gone", job.Annotations[v1alpha1.WorkerAnnotation])
	}
	updated, err := activatedJob(job, wc.Name, wc.Spec.Scheduling)
	if err != nil {
		return err
	}
	if err := r.writeJob(ctx, updated); err != nil {
		return fmt.Errorf("injecting %s's directives and unsuspending: %w", wc.Name, err)
	}
	*job = *updated
	return nil
}

// copyStatus writes the status translated from the mirror's (desired).
func (r *JobReconciler) copyStatus(ctx context.Context, job *batchv1.Job, desired batchv1.JobStatus, worker string) error {
	key := client.ObjectKeyFromObject(job)
	observed, hadObserved := r.observed.take(key)
	updated := job.DeepCopy()
	updated.Status = desired
	err := r.Client.Status().Update(ctx, updated)
	switch {
	case err == nil:
		metrics.StatusSyncTotal.WithLabelValues(worker, "written").Inc()
		if hadObserved {
			metrics.StatusSyncLag.Observe(r.Clock.Since(observed).Seconds())
		}
		if jobstatus.Finished(desired) {
			r.finished.wrote(job)
		}
		job.Status = updated.Status
		job.ResourceVersion = updated.ResourceVersion
		return nil
	case apierrors.IsInvalid(err):
		metrics.StatusSyncTotal.WithLabelValues(worker, "rejected").Inc()
		for _, field := range mirror.RejectedFields(err) {
			metrics.StatusWriteRejected.WithLabelValues(field).Inc()
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonStatusRejected, "SyncStatus", "the API server rejected the status copied from %s: %v", worker, err)
		logf.FromContext(ctx).Error(err, "status copy rejected", "worker", worker)
		return errRejectedCopy
	default:
		if hadObserved {
			r.observed.seen(key, observed)
		}
		result := "error"
		if apierrors.IsConflict(err) {
			result = "conflict"
		}
		metrics.StatusSyncTotal.WithLabelValues(worker, result).Inc()
		return fmt.Errorf("copying status from %s: %w", worker, err)
	}
}

// errRejectedCopy: the API server rejected a status copy; the user was told,
// and the copy is tried again with the mirror's next change.
var errRejectedCopy = errors.New("status copy rejected")

// finalize deletes the mirror of a manager Job that is gone or being
// deleted, and removes the finalizer an earlier version put on it. The
// mirror of a Job deleted while its worker was unreachable is left to the
// orphan collector, which deletes it once the worker is back.
func (r *JobReconciler) finalize(ctx context.Context, key types.NamespacedName, job *batchv1.Job) error {
	r.refusals.forget(key)
	r.finished.forget(key)
	r.attempts.forget(key)
	r.waiting.remove(key)
	r.observed.take(key)
	if job == nil {
		r.assume.forgetJob(key)
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
		if m == nil || m.DeletionTimestamp != nil || (job != nil && !mirror.IsMirrorOf(m, r.Origin, job.UID)) ||
			(job == nil && !workers.MayDelete(m, r.ManagerID, conn.OriginShared())) {
			continue
		}
		if _, err := workers.DeleteMirror(ctx, conn, worker, m); err != nil {
			return err
		}
	}
	if job == nil {
		return nil
	}
	r.assume.forget(job.UID)
	return r.removeFinalizer(ctx, job)
}

func (r *JobReconciler) removeFinalizer(ctx context.Context, job *batchv1.Job) error {
	if !controllerutil.ContainsFinalizer(job, v1alpha1.MirrorFinalizer) {
		return nil
	}
	updated := job.DeepCopy()
	controllerutil.RemoveFinalizer(updated, v1alpha1.MirrorFinalizer)
	if err := r.writeJob(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// deleteMirror deletes the mirror m on worker.
func (r *JobReconciler) deleteMirror(ctx context.Context, worker string, m *batchv1.Job) error {
	conn := r.conn(worker)
	if conn == nil {
		return fmt.Errorf("deleting mirror %s/%s: no connection to %s", m.Namespace, m.Name, worker)
	}
	_, err := workers.DeleteMirror(ctx, conn, worker, m)
	return err
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

func isFinished(job *batchv1.Job) bool { return jobstatus.Finished(job.Status) }
