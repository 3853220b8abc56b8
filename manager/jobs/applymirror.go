package jobs

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The steps that write the mirror on the worker, and the status copied back
// from it.

// applyCreateMirror creates the mirror; a created one is recorded in the
// next step, at once, and a same-named Job found instead goes to the next
// step as Foreign.
func (r *JobReconciler) applyCreateMirror(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	created, result, err := r.createMirror(ctx, a.s, a.memo)
	if errors.Is(err, errForeign) {
		return a.next()
	}
	return result, created && err == nil, err
}

// applyFence deletes the mirror of an attempt a later one replaced.
func (r *JobReconciler) applyFence(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if err := r.deleteMirror(ctx, a.s.Worker, a.st.Mirror); err != nil {
		return stop(r.refused(ctx, a.s.Job, writeMirrorGone, "deleting the mirror", workerAPI(a.s.Worker), err))
	}
	return a.done(nil)
}

func (r *JobReconciler) applyUpdateMirror(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	return stop(r.updateMirror(ctx, a.s.Job, a.s.Worker, a.s.Mirror, a.st))
}

// applyInvalidMirror says, once per spec of the Job, why its change is not
// carried to the mirror.
func (r *JobReconciler) applyInvalidMirror(_ context.Context, a applyScope) (reconcile.Result, bool, error) {
	r.refusals.remember(a.s.Job, writeMirrorSpec)
	r.Recorder.Eventf(a.s.Job, nil, corev1.EventTypeWarning, ReasonInvalidMirror, writeMirrorSpec.action, "%s", a.st.Why)
	return a.next()
}

func (r *JobReconciler) applyCopyStatus(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	err := r.copyStatus(ctx, a.s.Job, a.st.Status, a.s.Worker)
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
		return stop(r.refused(ctx, a.s.Job, writeMirrorGone, "deleting the mirror", workerAPI(a.s.Worker), err))
	}
	r.assume.forget(a.s.Job.UID)
	return a.done(r.removeFinalizer(ctx, a.s.Job))
}
