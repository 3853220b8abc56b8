package jobs

import (
	"context"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/metrics"
)

// The steps that write the manager Job's placement: place, activate,
// record, release and place again.

// applyComplete completes a Job of zero completions without a worker.
func (r *JobReconciler) applyComplete(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.completeWithoutPods(ctx, a.s.Job); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeJob, "completing the Job (completions is 0)", managerAPI, err))
	}
	return a.done(nil)
}

func (r *JobReconciler) applyPlace(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	placed, result, err := r.place(ctx, a.s.Job, a.memo)
	return result, placed, err
}

func (r *JobReconciler) applyActivate(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.activate(ctx, a.s.Job, a.s.WorkerCluster); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeActivation, "injecting "+a.s.Worker+"'s directives and unsuspending the Job", managerAPI, err))
	}
	return a.next()
}

func (r *JobReconciler) applyRecord(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.record(ctx, a.s.Job, a.st.MirrorUID); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeJob, "recording jobferry's state on the Job", managerAPI, err))
	}
	return a.next()
}

// applyNameConflict places the Job again, elsewhere: a same-named Job
// jobferry did not create holds its name on the worker.
func (r *JobReconciler) applyNameConflict(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	job, worker := a.s.Job, a.s.Worker
	metrics.DispatchTotal.WithLabelValues(worker, "conflict").Inc()
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonNameConflict, "Dispatch", "%s", a.st.Why)
	a.memo.foreign = nil
	exclude := func(updated *batchv1.Job) {
		updated.Annotations[v1alpha1.ExcludedWorkersAnnotation] = strings.Join(append(dispatch.ExcludedWorkers(job), worker), ",")
	}
	if err := r.release(ctx, job, worker, exclude); err != nil {
		return stop(r.refused(ctx, job, writeJob, "placing the Job again after a name conflict on "+worker, managerAPI, err))
	}
	return a.next()
}

// applyRelease places the Job again: its worker may no longer take it.
func (r *JobReconciler) applyRelease(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeJob, "releasing the placement on "+a.s.Worker, managerAPI, err))
	}
	r.Recorder.Eventf(a.s.Job, nil, corev1.EventTypeWarning, ReasonMissingRights, "Dispatch", "%s", a.st.Why)
	return a.next()
}

// applyRedispatch places the Job again: its worker is lost.
func (r *JobReconciler) applyRedispatch(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeJob, "releasing the placement on lost worker "+a.s.Worker, managerAPI, err))
	}
	metrics.DispatchTotal.WithLabelValues(a.s.Worker, "lost").Inc()
	r.Recorder.Eventf(a.s.Job, nil, corev1.EventTypeWarning, ReasonWorkerLost, "Redispatch", "%s", a.st.Why)
	return a.next()
}

// applyMirrorReplaced places the Job again as a new attempt: its mirror was
// deleted on the worker, or replaced by a Job jobferry did not create.
func (r *JobReconciler) applyMirrorReplaced(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	reason, result := ReasonMirrorNotOurs, "not_ours"
	if a.st.Kind == stepMirrorGone {
		reason, result = ReasonMirrorDeleted, "deleted"
	}
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeJob, "dispatching the Job again", managerAPI, err))
	}
	metrics.DispatchTotal.WithLabelValues(a.s.Worker, result).Inc()
	r.Recorder.Eventf(a.s.Job, nil, corev1.EventTypeWarning, reason, "Redispatch", "%s", a.st.Why)
	return a.next()
}
