package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// The steps that write the mirror on the worker — create it (with its
// namespace there), carry spec changes, fence and delete it — and the
// status copied back from it.

// applyCreateMirror creates the mirror; a created one is recorded in the
// next step, at once, and a same-named Job found instead goes to the next
// step as Foreign.
func (r *JobReconciler) applyCreateMirror(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	out, result, err := r.createMirror(ctx, a.s, a.memo.placement, a.tell)
	if out.foreign != nil {
		a.memo.foreign = out.foreign
		return a.next()
	}
	return result, out.created && err == nil, err
}

// createOutcome is what an attempt to create the mirror came to, beside
// the reconcile's result: the mirror created, or a same-named Job found
// that jobferry did not create.
type createOutcome struct {
	created bool
	foreign *batchv1.Job
}

// applyFence deletes the mirror of an attempt a later one replaced.
func (r *JobReconciler) applyFence(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.deleteMirror(ctx, a.s.Worker, a.st.Mirror); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteMirrorGone, "deleting the mirror", workerAPI(a.s.Worker), err))
	}
	if a.st.Why != "" {
		// A mirror fenced for a reason the user should hear (hidden, or of
		// an attempt jobferry had given up), said after the delete.
		reason := policy.ReasonMirrorHidden
		if a.st.EventReason != "" {
			reason = a.st.EventReason
		}
		a.tell.say(a.s.Job, corev1.EventTypeWarning, reason, "Fence", "%s", a.st.Why)
	}
	return a.done(nil)
}

func (r *JobReconciler) applyUpdateMirror(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	return stop(r.updateMirror(ctx, a.s.Job, a.s.Worker, a.s.Mirror, a.st, a.tell))
}

// applyInvalidMirror says, once per spec of the Job, why its change is not
// carried to the mirror.
func (r *JobReconciler) applyInvalidMirror(_ context.Context, a applyScope) (reconcile.Result, bool, error) {
	r.memory.refusals.remember(a.s.Job, policy.WriteMirrorSpec)
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.ReasonInvalidMirror, policy.WriteMirrorSpec.Action, "%s", a.st.Why)
	return a.next()
}

func (r *JobReconciler) applyCopyStatus(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	err := r.copyStatus(ctx, a.s.Job, a.st.Status, a.s.Worker, a.tell)
	switch {
	case errors.Is(err, errRejectedCopy):
		return a.done(nil)
	case err != nil:
		return stop(reconcile.Result{}, err)
	}
	return a.next()
}

// applyDeleteMirror deletes the mirror of a Job being deleted (or of a
// finished one, when asked), then lets the Job go.
func (r *JobReconciler) applyDeleteMirror(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.deleteMirror(ctx, a.s.Worker, a.st.Mirror); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteMirrorGone, "deleting the mirror", workerAPI(a.s.Worker), err))
	}
	r.placing.assume.forget(a.s.Job.UID)
	return a.done(r.removeFinalizer(ctx, a.s.Job))
}

// adoptableNow: the Job found at the mirror's name after a refused create
// may be taken as the mirror jobferry created (adoptable).
func adoptableNow(job, existing *batchv1.Job, key jobstate.Key) bool {
	ok, _ := adoptable(job, existing, key)
	return ok
}

// prepareWorkerNamespace leaves the worker's namespace of a Job as
// planWorkerNamespace decides (created, or its Pod Security labels set to
// the manager namespace's), before a mirror is created or its pod template
// changed there. A namespace it may not use (someone else made it since it
// was looked at, or it is gone and may not be made) is an error: the mirror
// is not written, and the next look at the Job places it again.
func (r *JobReconciler) prepareWorkerNamespace(ctx context.Context, conn workers.Conn, managerNS *corev1.Namespace, name string) error {
	// Twice at most: a namespace someone made between the read and the
	// create is read again and planned as found.
	for range 2 {
		have, err := conn.Namespace(ctx, name)
		if err != nil {
			return err
		}
		plan := planWorkerNamespace(name, have, podSecurityLabels(managerNS), r.Config.ManagerID, conn.NamespaceRights(), slices.Contains(conn.AllowedNamespaces(), name))
		switch plan.action {
		case namespaceCreate:
			created, err := conn.CreateNamespace(ctx, plan.namespace)
			if err != nil || created {
				return err
			}
		case namespaceRelabel:
			return conn.RelabelNamespace(ctx, have, plan.namespace)
		case namespaceNotAccepted:
			return errors.New(notAccepted(plan.namespace, r.Config.ManagerID))
		case namespaceMissing:
			return fmt.Errorf("namespace %s is gone from the worker, and the manager does not create namespaces there", name)
		default:
			return nil
		}
	}
	return fmt.Errorf("namespace %s was neither found nor created on the worker", name)
}

// createMirror creates the mirror on the Job's worker (and its namespace,
// when the manager may create namespaces there). A same-named Job that is
// not ours is handed back (to Next, as Foreign). placement explains the
// placement made in this reconcile, for the Dispatched Event.
func (r *JobReconciler) createMirror(ctx context.Context, s policy.State, placement string, tell *announcements) (createOutcome, reconcile.Result, error) {
	job, worker := s.Job, s.Worker
	conn := r.conn(worker)
	if conn == nil {
		return createOutcome{}, reconcile.Result{Requeue: true}, nil
	}
	if conn.NamespaceRights().Create {
		ns, err := r.namespaces().Get(ctx, job.Namespace)
		if err != nil {
			return createOutcome{}, reconcile.Result{}, err
		}
		// The worker's Pod Security admission holds the mirror's pods to
		// the manager namespace's levels.
		if err := r.prepareWorkerNamespace(ctx, conn, ns, job.Namespace); err != nil {
			result, err := r.mirrorRefused(ctx, job, policy.WriteNamespace, "preparing namespace "+job.Namespace, worker, err)
			return createOutcome{}, result, err
		}
	}
	whole, err := r.withStoredTemplate(ctx, job)
	if err != nil {
		return createOutcome{}, reconcile.Result{}, err
	}
	if whole == nil {
		// Its spec changed since it was read, or it is gone: the cache
		// brings the news, and the mirror is built from the new spec.
		return createOutcome{}, reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	m, err := policy.DesiredMirror(whole, policy.Activates(s), s.WorkerCluster, r.Config.Origin, r.Config.ManagerID)
	if err != nil {
		tell.say(job, corev1.EventTypeWarning, policy.ReasonInvalidMirror, "CreateMirror", "cannot build the mirror for %s: %v", worker, err)
		return createOutcome{}, reconcile.Result{}, r.showWaiting(ctx, job, policy.WaitingForMirror(policy.ReasonWaitingForMirror, worker, "cannot build its mirror: %v", err))
	}
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return createOutcome{}, reconcile.Result{}, err
	}
	m.Labels[v1alpha1.AttemptSealLabel] = jobstate.AttemptSeal(key.Secret, job.UID, mirror.Attempt(m))
	err = conn.Client().Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		return r.mirrorExists(ctx, s, conn, m, key)
	}
	if namespaceGone(err) {
		// Deleted on the worker since the manager last saw it (its mirrors
		// with it): read, and created, again on the next try.
		conn.ForgetNamespace(job.Namespace)
		metrics.DispatchTotal.WithLabelValues(worker, "error").Inc()
		return createOutcome{}, reconcile.Result{RequeueAfter: 2 * time.Second}, r.showWaiting(ctx, job, policy.WaitingForMirror(policy.ReasonWaitingForMirror, worker,
			"its namespace %s there is gone or being deleted; the mirror is created once jobferry has created it again (or, where it may not create namespaces, once someone has)", job.Namespace))
	}
	if err != nil {
		metrics.DispatchTotal.WithLabelValues(worker, "error").Inc()
		result, err := r.mirrorRefused(ctx, job, policy.WriteMirror, "creating the mirror", worker, err)
		return createOutcome{}, result, err
	}
	r.mirrorCreated(job, m, worker, s.Queue != nil, placementReasons(placement, s.Queue, worker), tell)
	return createOutcome{created: true}, reconcile.Result{}, nil
}

// placementReasons explains the placement for the Dispatched Event: the
// one made in this reconcile, or, for a queued Job placed in an earlier
// one (before Kueue admitted it), the reasons jobferry wrote with its
// Ready check then, when that message is a placement's on this worker
// (a check written Ready again after a refused write says only where).
func placementReasons(madeNow string, q *workload.View, worker string) string {
	if madeNow != "" {
		return madeNow
	}
	if q != nil && q.State == kueue.CheckStateReady && strings.HasPrefix(q.Message, dispatch.PlacedOn(worker)) {
		return q.Message
	}
	return ""
}

// mirrorExists decides about the Job that holds the mirror's name on the
// worker, found when the create was refused as existing: the mirror
// created earlier (the cache has not caught up), a stale attempt (fenced),
// or a Job jobferry did not create (handed back as foreign).
func (r *JobReconciler) mirrorExists(ctx context.Context, s policy.State, conn workers.Conn, m *batchv1.Job, key jobstate.Key) (createOutcome, reconcile.Result, error) {
	job, worker := s.Job, s.Worker
	existing, err := conn.UncachedJob(ctx, client.ObjectKeyFromObject(m))
	if err != nil {
		return createOutcome{}, reconcile.Result{}, fmt.Errorf("reading the Job %s/%s that exists on %s: %w", m.Namespace, m.Name, worker, err)
	}
	if mirror.IsMirrorOf(existing, r.Config.Origin, job.UID) && mirror.Attempt(existing) == mirror.Attempt(m) &&
		(existing.UID == s.MirrorUID || existing.UID == s.CreatedMirrorUID || (s.AdoptMirror && adoptableNow(job, existing, key))) {
		// Ours, created earlier; the cache has not caught up yet.
		return createOutcome{}, reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	if mirror.IsMirrorOf(existing, r.Config.Origin, job.UID) && mirror.Attempt(existing) < mirror.Attempt(m) {
		// A stale attempt the cache does not show yet: fenced, as the
		// next step would once it does.
		if _, err := workers.DeleteMirror(ctx, conn, worker, existing); err != nil {
			result, err := r.refused(ctx, job, policy.WriteMirrorGone, "deleting the mirror of an earlier attempt", workerAPI(worker), err)
			return createOutcome{}, result, err
		}
		return createOutcome{}, reconcile.Result{RequeueAfter: time.Second}, nil
	}
	// Whatever its labels say: a Job jobferry did not create (or its copy,
	// made in the moment before this create).
	return createOutcome{foreign: existing}, reconcile.Result{}, nil
}

// mirrorCreated counts and announces a mirror just created, and remembers
// it until the Job records it. One Event per dispatch: where, why there,
// and the mirror made.
func (r *JobReconciler) mirrorCreated(job, m *batchv1.Job, worker string, queued bool, placement string, tell *announcements) {
	metrics.DispatchTotal.WithLabelValues(worker, "created").Inc()
	r.memory.attempts.created(job, m.UID, r.Clock.Now())
	attempt := max(jobstate.Attempt(job), 1)
	if attempt <= 1 && !queued {
		// A queued Job's wait is Kueue's (its own metrics measure it).
		metrics.DispatchDuration.Observe(r.Clock.Since(job.CreationTimestamp.Time).Seconds())
	}
	if placement == "" {
		placement = "placed on " + worker
	}
	tell.say(job, corev1.EventTypeNormal, policy.ReasonDispatched, "Dispatch", "%s; created its mirror there (attempt %d)", placement, attempt)
	// The mirror's status comes with its first event; the Suspended
	// condition the Job may show while it waited is replaced then.
}

// namespaceGone: a create was refused because its namespace does not exist,
// or is being deleted.
func namespaceGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// mirrorRefused reports a refused write on the worker for a Job that has no
// mirror yet: on the Job (Event and Suspended condition), and, when the
// worker refused it as forbidden, by checking the worker's rights at once, so
// that a credential lacking them releases the Job for another worker.
func (r *JobReconciler) mirrorRefused(ctx context.Context, job *batchv1.Job, w policy.Write, what, worker string, err error) (reconcile.Result, error) {
	if reported(err) {
		if werr := r.showWaiting(ctx, job, policy.WaitingForMirror(policy.ReasonWaitingForMirror, worker, "%s was refused: %s", what, apiMessage(err))); werr != nil {
			return reconcile.Result{}, werr
		}
	}
	result, rerr := r.refused(ctx, job, w, what, workerAPI(worker), err)
	if classify(err) == forbidden {
		if missing := r.Workers.RecheckRights(ctx, worker); len(missing) > 0 {
			// The next step releases the Job for another worker.
			return reconcile.Result{Requeue: true}, rerr
		}
	}
	return result, rerr
}

// updateMirror carries what the user changed on the running manager Job to
// its mirror (policy.Next decided what, from cached, the mirror as the
// worker's cache keeps it).
func (r *JobReconciler) updateMirror(ctx context.Context, job *batchv1.Job, worker string, cached *batchv1.Job, st policy.Step, tell *announcements) (reconcile.Result, error) {
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
			return r.refused(ctx, job, policy.WriteNamespace, "preparing namespace "+job.Namespace, workerAPI(worker), err)
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
		return r.refused(ctx, job, policy.WriteMirrorSpec, "carrying "+strings.Join(st.Changed, ", ")+" to the mirror", workerAPI(worker), err)
	}
	changed := st.Changed
	if slices.Contains(changed, "suspend") {
		// KEP-2232: the worker deletes or recreates the pods and reports
		// Suspended and startTime, which the status copy brings back.
		reason, verb := policy.ReasonMirrorResumed, "resumed"
		if ptr.Deref(st.Mirror.Spec.Suspend, false) {
			reason, verb = policy.ReasonMirrorSuspended, "suspended"
		}
		tell.say(job, corev1.EventTypeNormal, reason, "Suspend", "mirror on %s %s", worker, verb)
		changed = slices.DeleteFunc(slices.Clone(changed), func(f string) bool { return f == "suspend" })
	}
	if len(changed) > 0 {
		tell.say(job, corev1.EventTypeNormal, policy.ReasonMirrorUpdated, policy.WriteMirrorSpec.Action, "carried %s to the mirror on %s", strings.Join(changed, ", "), worker)
	}
	// The worker's answer to the new spec comes with the mirror's next event.
	return reconcile.Result{}, nil
}

// withStoredTemplate is job with the pod template and the annotations the
// API server holds: the cache keeps manager Jobs' templates without what
// only their mirror needs, and their annotations but jobferry's not at all
// (managercache.trimJob), and a mirror is created whole. One read per mirror
// created. nil when the Job is gone or its spec (whose every change moves
// its generation) changed since job was read: the mirror is not built from
// a mix of the two.
func (r *JobReconciler) withStoredTemplate(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	stored := &batchv1.Job{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), stored); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the pod template of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if stored.UID != job.UID || stored.Generation != job.Generation {
		return nil, nil
	}
	whole := job.DeepCopy()
	whole.Spec.Template = stored.Spec.Template
	// The cache keeps jobferry's annotations only; the mirror carries the
	// Job's others as the API server holds them.
	for k, v := range stored.Annotations {
		if !jobstate.InDomain(k) {
			if whole.Annotations == nil {
				whole.Annotations = map[string]string{}
			}
			whole.Annotations[k] = v
		}
	}
	return whole, nil
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

// copyStatus writes the status translated from the mirror's (desired).
func (r *JobReconciler) copyStatus(ctx context.Context, job *batchv1.Job, desired batchv1.JobStatus, worker string, tell *announcements) error {
	key := client.ObjectKeyFromObject(job)
	observed, hadObserved := r.memory.observed.take(key)
	updated, err := r.writeStatus(ctx, job, desired)
	switch {
	case err == nil:
		r.memory.copies.wrote(r.Clock.Now())
		metrics.StatusSyncTotal.WithLabelValues(worker, "written").Inc()
		if hadObserved {
			metrics.StatusSyncLag.Observe(r.Clock.Since(observed).Seconds())
		}
		if jobstatus.Finished(desired) {
			r.memory.finished.wrote(job)
		}
		job.Status = updated.Status
		job.ResourceVersion = updated.ResourceVersion
		return nil
	case apierrors.IsInvalid(err):
		metrics.StatusSyncTotal.WithLabelValues(worker, "rejected").Inc()
		for _, field := range mirror.RejectedFields(err) {
			metrics.StatusWriteRejected.WithLabelValues(field).Inc()
		}
		tell.say(job, corev1.EventTypeWarning, policy.ReasonStatusRejected, "SyncStatus", "the API server rejected the status copied from %s: %v", worker, err)
		logf.FromContext(ctx).Error(err, "status copy rejected", "worker", worker)
		return errRejectedCopy
	default:
		if hadObserved {
			r.memory.observed.seen(key, observed)
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

// deleteMirror deletes the mirror m on worker.
func (r *JobReconciler) deleteMirror(ctx context.Context, worker string, m *batchv1.Job) error {
	conn := r.conn(worker)
	if conn == nil {
		return fmt.Errorf("deleting mirror %s/%s: no connection to %s", m.Namespace, m.Name, worker)
	}
	_, err := workers.DeleteMirror(ctx, conn, worker, m)
	return err
}
