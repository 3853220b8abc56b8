package jobs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// The steps that write the manager Job's placement — place, activate,
// record, release and place again — and what they read to decide it: the
// dispatch policy's verdict (admit) and each worker's view for
// dispatch.Place (workerViews).

// applyComplete completes a Job of zero completions without a worker.
func (r *JobReconciler) applyComplete(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.completeWithoutPods(ctx, a.s.Job, a.tell); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "completing the Job (completions is 0)", managerAPI, err))
	}
	return a.done(nil)
}

func (r *JobReconciler) applyPlace(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	placed, result, err := r.place(ctx, a.s.Job, a.s.Queue, a.memo, a.tell)
	return result, placed, err
}

func (r *JobReconciler) applyActivate(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.activate(ctx, a.s.Job, a.s.WorkerCluster); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteActivation, "injecting "+a.s.Worker+"'s directives and unsuspending the Job", managerAPI, err))
	}
	return a.next()
}

func (r *JobReconciler) applyRecord(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	// What this manager takes as jobferry's without having written it
	// says so, with why.
	log := logf.FromContext(ctx)
	switch {
	case a.s.Legacy:
		log.Info("adopting jobferry's state written without a seal: the Job predates the seal key", "job", a.key, "created", a.s.Job.CreationTimestamp.Time)
	case a.st.MirrorUID != "" && a.st.MirrorUID != a.s.CreatedMirrorUID:
		log.Info("adopting the unrecorded mirror of the Job's attempt", "job", a.key, "worker", a.s.Worker, "mirror", a.st.MirrorUID, "why", a.s.AdoptWhy)
	}
	if err := r.record(ctx, a.s.Job, a.st.MirrorUID, a.st.RecordQueue); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "recording jobferry's state on the Job", managerAPI, err))
	}
	return a.next()
}

// applyNameConflict places the Job again, elsewhere: a same-named Job
// jobferry did not create holds its name on the worker.
func (r *JobReconciler) applyNameConflict(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	job, worker := a.s.Job, a.s.Worker
	exclude := func(updated *batchv1.Job) {
		updated.Annotations[v1alpha1.ExcludedWorkersAnnotation] = strings.Join(append(dispatch.ExcludedWorkers(job), worker), ",")
	}
	if err := r.release(ctx, job, worker, exclude); err != nil {
		return stop(r.refused(ctx, job, policy.WriteJob, "placing the Job again after a name conflict on "+worker, managerAPI, err))
	}
	a.memo.foreign = nil
	metrics.DispatchTotal.WithLabelValues(worker, "conflict").Inc()
	a.tell.say(job, corev1.EventTypeWarning, policy.ReasonNameConflict, "Dispatch", "%s", a.st.Why)
	return a.next()
}

// applyRelease places the Job again: its worker may no longer take it.
func (r *JobReconciler) applyRelease(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "releasing the placement on "+a.s.Worker, managerAPI, err))
	}
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.ReasonMissingRights, "Dispatch", "%s", a.st.Why)
	return a.next()
}

// applyRedispatch places the Job again: its worker is lost.
func (r *JobReconciler) applyRedispatch(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "releasing the placement on lost worker "+a.s.Worker, managerAPI, err))
	}
	metrics.DispatchTotal.WithLabelValues(a.s.Worker, "lost").Inc()
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.ReasonWorkerLost, "Redispatch", "%s", a.st.Why)
	return a.next()
}

// applyMirrorReplaced places the Job again as a new attempt: its mirror was
// deleted on the worker, or replaced by a Job jobferry did not create.
func (r *JobReconciler) applyMirrorReplaced(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	reason, result := policy.ReasonMirrorNotOurs, "not_ours"
	if a.st.Kind == policy.StepMirrorGone {
		reason, result = policy.ReasonMirrorDeleted, "deleted"
	}
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "dispatching the Job again", managerAPI, err))
	}
	metrics.DispatchTotal.WithLabelValues(a.s.Worker, result).Inc()
	a.tell.say(a.s.Job, corev1.EventTypeWarning, reason, "Redispatch", "%s", a.st.Why)
	return a.next()
}

// place chooses a worker for the Job and records it, with the worker's
// directives and the Job unsuspended, in one write (PlacedJob) — or, for a
// Job Kueue queues (q), the placement alone (PlacedQueuedJob), and a Job no
// worker could ever run gets jobferry's check Rejected. placed reports a
// placement recorded: the mirror (or the check Ready) can be written next.
func (r *JobReconciler) place(ctx context.Context, job *batchv1.Job, q *workload.View, memo *stepMemo, tell *announcements) (placed bool, result reconcile.Result, err error) {
	ns, err := r.namespaces().Get(ctx, job.Namespace)
	if err != nil {
		return false, reconcile.Result{}, err
	}
	// Worker namespaces are read now, not under the placement lock.
	r.Workers.ReadNamespaces(ctx, job.Namespace)
	// Its namespace here judges its pods first (tenantlimits.go).
	pods, err := r.admitPods(ctx, job)
	if err != nil {
		return false, reconcile.Result{}, err
	}
	if pods.Refused != "" {
		return false, reconcile.Result{RequeueAfter: policy.PodsRecheck}, r.podsRefused(ctx, job, q, pods.Refused, tell)
	}
	// A wake-up that starts from here on may not see this Job waiting yet.
	pass := r.placing.waiting.pass()
	asWritten := policy.AsUserWroteIt(job)
	if len(pods.Admitted.Containers)+len(pods.Admitted.InitContainers) > 0 {
		// Placed as its pods will run: with what admission gave them.
		asWritten = asWritten.DeepCopy()
		mirror.WithAdmitted(&asWritten.Spec.Template.Spec, pods.Admitted)
	}
	var charge *tenantlimits.Charged
	if q == nil {
		// Kueue's quota bounds a queued Job.
		charge = &tenantlimits.Charged{QuotaCharge: pods.Admitted.Charge, Pods: dispatch.PodsAtOnce(job)}
	}
	decision, never, invalid, quota, err := r.decide(ctx, asWritten, ns, charge)
	if err != nil {
		return false, reconcile.Result{}, err
	}
	if quota != nil {
		r.placing.quotaWaiting.add(client.ObjectKeyFromObject(job))
		wrote, err := r.updateWaiting(ctx, job, policy.WaitingForWorker(policy.ReasonQuotaExceeded, "%s", quota.Gist))
		if wrote {
			tell.say(job, corev1.EventTypeWarning, policy.ReasonQuotaExceeded, "Place", "%s", quota.Message)
		}
		return false, reconcile.Result{RequeueAfter: quotaRecheck}, err
	}
	r.placing.quotaWaiting.remove(client.ObjectKeyFromObject(job))
	for worker, code := range decision.Codes {
		metrics.PlacementRejections.WithLabelValues(worker, code).Inc()
	}
	switch outcome := policy.Placement(decision, invalid, never, q); outcome.Kind {
	case policy.PlacementInvalidSelector:
		tell.say(job, corev1.EventTypeWarning, outcome.EventReason, "Place", "%s", outcome.EventMessage)
		return false, reconcile.Result{}, r.showWaiting(ctx, job, outcome.Waiting)
	case policy.PlacementRejected:
		return false, reconcile.Result{}, r.reject(ctx, job, *q, outcome, tell)
	case policy.PlacementWaits:
		metrics.DispatchTotal.WithLabelValues("", "unschedulable").Inc()
		// It waits in the room, woken when capacity or a worker change
		// gives it room; the requeue is a safety net.
		if missed := r.placing.waiting.add(asWritten, pass); missed {
			r.wakeWaiting()
		}
		wrote, err := r.updateWaiting(ctx, job, outcome.Waiting)
		if wrote {
			tell.say(job, corev1.EventTypeWarning, outcome.EventReason, "Place", "%s", outcome.EventMessage)
		}
		return false, reconcile.Result{RequeueAfter: outcome.RequeueAfter}, err
	}
	placed, result, err = r.recordPlacement(ctx, job, q != nil, decision.Worker, pods.Admitted)
	if placed {
		memo.placement = decision.Summary()
	}
	return placed, result, err
}

// recordPlacement records the placement on worker in one write of the Job:
// with the worker's directives and the Job unsuspended (PlacedJob), or,
// queued, the placement alone (PlacedQueuedJob); with the resources its
// namespace's admission gave its pods. What decide assumed goes when the
// write fails; a refusal is said on the Job, and job is the Job as
// written.
func (r *JobReconciler) recordPlacement(ctx context.Context, job *batchv1.Job, queued bool, worker string, admitted v1alpha1.AdmittedPods) (bool, reconcile.Result, error) {
	wc, err := r.workerCluster(ctx, worker)
	if err != nil {
		r.placing.assume.forget(job.UID)
		r.placing.charging.forget(job.UID)
		return false, reconcile.Result{}, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	var updated *batchv1.Job
	if queued {
		updated = policy.PlacedQueuedJob(job, worker)
	} else {
		updated, err = policy.PlacedJob(job, worker, wc.Spec.Scheduling)
	}
	if err == nil {
		err = policy.WithAdmittedPods(updated, admitted)
	}
	if err == nil {
		err = r.writeJob(ctx, job, updated)
	}
	if err != nil {
		r.placing.assume.forget(job.UID)
		r.placing.charging.forget(job.UID)
		if reported(err) {
			if werr := r.showWaiting(ctx, job, policy.WaitingForWorker(policy.ReasonWaitingForWorker, "recording the placement on %s was refused: %s", worker, apiMessage(err))); werr != nil {
				return false, reconcile.Result{}, werr
			}
		}
		result, err := r.refused(ctx, job, policy.WritePlacement, "recording the placement on "+worker, managerAPI, err)
		return false, result, err
	}
	r.carryPodVerdict(job, updated)
	*job = *updated
	r.memory.attempts.placed(job)
	r.placing.waiting.remove(client.ObjectKeyFromObject(job))
	return true, reconcile.Result{}, nil
}

// decide places the Job and assumes its request on the chosen worker at once,
// under one lock, so concurrent placements see each other's choices; the
// slower write that records the placement happens outside the lock.
// never, when nothing is placed, says why no worker could ever run the Job
// (dispatch.NeverFits), "" when one might; invalid says what is wrong with
// the Job itself; err is a failure to read.
//
// charge, when set, is what the Job's pods charge to its namespace's
// ResourceQuotas: quota, when set, says which has no room for them, and
// nothing is placed.
func (r *JobReconciler) decide(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace, charge *tenantlimits.Charged) (decision dispatch.Decision, never string, invalid error, quota *tenantlimits.QuotaRefusal, err error) {
	r.placing.mu.Lock()
	defer r.placing.mu.Unlock()
	if charge != nil {
		if quota, err = r.quotaRefuses(ctx, job, *charge, nil); err != nil || quota != nil {
			return dispatch.Decision{}, "", nil, quota, err
		}
	}
	workers, err := r.workerViews(ctx, job, ns)
	if err != nil {
		return dispatch.Decision{}, "", nil, nil, err
	}
	decision, invalid = dispatch.Place(job, workers)
	switch {
	case invalid != nil:
	case decision.Placed():
		r.placing.assume.assume(job.UID, client.ObjectKeyFromObject(job), decision.Worker, decision.Pool, decision.Request)
		if charge != nil {
			r.placing.charging.add(job.UID, job.Namespace, *charge, r.Clock.Now())
		}
	default:
		never = dispatch.NeverFits(job, workers)
	}
	return decision, never, invalid, nil, nil
}

// podsRefused tells the Job, and for a queued Job Kueue, that its
// namespace does not admit its pods: jobferry's check on its Workload is
// Rejected (Kueue gives its quota back rather than hold it for a Job that
// cannot run), or the Job waits, looked at again after PodsRecheck.
func (r *JobReconciler) podsRefused(ctx context.Context, job *batchv1.Job, q *workload.View, refused string, tell *announcements) error {
	w := policy.PodsNotAdmitted(job.Namespace, refused)
	if q != nil && q.Check != "" {
		if err := r.Queue.SetCheck(ctx, job.Namespace, *q, workload.CheckUpdate{State: kueue.CheckStateRejected, Message: w.Message}); err != nil {
			return err
		}
		metrics.DispatchTotal.WithLabelValues("", "rejected").Inc()
		tell.wrote(job, corev1.EventTypeWarning, policy.ReasonPodsNotAdmitted, "Place", "%s; jobferry's admission check %s on Workload %s is Rejected", w.Message, q.Check, q.Workload)
		return r.showWaiting(ctx, job, w)
	}
	wrote, err := r.updateWaiting(ctx, job, w)
	if wrote {
		tell.say(job, corev1.EventTypeWarning, policy.ReasonPodsNotAdmitted, "Place", "%s", w.Message)
	}
	return err
}

// reject turns jobferry's check on the queued Job's Workload Rejected (no
// worker could ever run it: Kueue gives its quota back rather than hold it),
// then says so on the Job.
func (r *JobReconciler) reject(ctx context.Context, job *batchv1.Job, q workload.View, outcome policy.PlacementOutcome, tell *announcements) error {
	if err := r.Queue.SetCheck(ctx, job.Namespace, q, outcome.Check); err != nil {
		return err
	}
	metrics.DispatchTotal.WithLabelValues("", "rejected").Inc()
	tell.wrote(job, corev1.EventTypeWarning, outcome.EventReason, "Place", "%s", outcome.EventMessage)
	return r.showWaiting(ctx, job, outcome.Waiting)
}

// workerViews describes every WorkerCluster for placement of a Job from the
// manager namespace ns.
func (r *JobReconciler) workerViews(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace) ([]dispatch.Worker, error) {
	// The cache's own objects, not copies: a copy of every WorkerCluster,
	// status and capacity included, at every placement was 5 % of the
	// manager's CPU at 100,000 Jobs. The view copies what it keeps.
	var list v1alpha1.WorkerClusterList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	views := make([]dispatch.Worker, 0, len(list.Items))
	for i := range list.Items {
		wc := &list.Items[i]
		view := dispatch.Worker{
			Name: wc.Name, Labels: maps.Clone(wc.Labels), Cordoned: wc.Spec.Cordoned, Namespaces: slices.Clone(wc.Spec.Namespaces),
			Directives: *wc.Spec.Scheduling.DeepCopy(), Assumed: r.placing.assume.assumed(wc.Name),
			WorkerJobController: wc.Spec.JobController == v1alpha1.JobControllerWorker,
		}
		if conn := r.conn(wc.Name); conn != nil && conn.Connected() {
			view.Connected = true
			view.Version = parsedVersion(conn)
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

// release undoes the placement of a Job on worker, so it is placed again
// (ReleasedJob); change, when set, edits the Job in the same write. The Job
// object is updated with what was written.
func (r *JobReconciler) release(ctx context.Context, job *batchv1.Job, worker string, change func(*batchv1.Job)) error {
	updated := policy.ReleasedJob(job)
	if change != nil {
		change(updated)
	}
	if err := r.writeJob(ctx, job, updated); err != nil {
		return err
	}
	r.placing.assume.forget(job.UID)
	*job = *updated
	return nil
}

// record writes jobferry's state on the Job, sealed: the UID of the mirror
// it created for the current attempt (when mirrorUID is set), or the state
// an earlier manager left unsealed. The Job object is updated with what was
// written.
func (r *JobReconciler) record(ctx context.Context, job *batchv1.Job, mirrorUID types.UID, queue string) error {
	updated := job.DeepCopy()
	if mirrorUID != "" {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.MirrorUIDAnnotation, string(mirrorUID))
	}
	if queue != "" {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.QueuedAnnotation, queue)
	}
	if err := r.writeJob(ctx, job, updated); err != nil {
		return err
	}
	*job = *updated
	return nil
}

// activate injects the worker's directives into a Job that was placed but
// is still held (placed by an earlier version, which unsuspended after
// creating the mirror) and unsuspends it, in one update.
func (r *JobReconciler) activate(ctx context.Context, job *batchv1.Job, wc *v1alpha1.WorkerCluster) error {
	if wc == nil {
		return fmt.Errorf("WorkerCluster %s is gone", job.Annotations[v1alpha1.WorkerAnnotation])
	}
	updated, err := policy.ActivatedJob(job, wc.Name, wc.Spec.Scheduling)
	if err != nil {
		return err
	}
	if err := r.writeJob(ctx, job, updated); err != nil {
		return fmt.Errorf("injecting %s's directives and unsuspending: %w", wc.Name, err)
	}
	r.carryPodVerdict(job, updated)
	*job = *updated
	return nil
}

// completeWithoutPods finishes a Job with nothing to run as upstream would:
// a Job held only for placement is first released (the user did not ask for
// it to be suspended, so it starts and completes), then its status is written.
func (r *JobReconciler) completeWithoutPods(ctx context.Context, job *batchv1.Job, tell *announcements) error {
	if policy.NeedsActivation(job) {
		updated := job.DeepCopy()
		updated.Spec.Suspend = ptr.To(false)
		delete(updated.Annotations, v1alpha1.HeldForPlacementAnnotation)
		if err := r.writeJob(ctx, job, updated); err != nil {
			return fmt.Errorf("releasing a Job with nothing to run: %w", err)
		}
		job = updated
	}
	updated, err := r.writeStatus(ctx, job, policy.CompletedWithoutPods(job, r.Clock.Now()))
	if err != nil {
		return fmt.Errorf("completing a Job with nothing to run: %w", err)
	}
	tell.say(updated, corev1.EventTypeNormal, "Completed", "Complete", "Job completed: completions is 0, so nothing was dispatched")
	return nil
}
