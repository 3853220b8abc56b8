package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// forbiddenRetry is when a write refused as forbidden is tried again: rights
// can be granted without the Job changing. A worker whose rights appear
// re-enqueues its Jobs at once (see workers.Pool), so this is a safety net.
const forbiddenRetry = time.Minute

// refusal says how the API server refused a write.
type refusal int

const (
	// transient: worth retrying with back-off (timeouts, unavailability).
	transient refusal = iota
	// conflict: lost a race with another write; retried quietly and soon.
	conflict
	// forbidden: the credential lacks the right; retried slowly.
	forbidden
	// rejected: the request itself is unacceptable (invalid, too large);
	// retried only once the Job has changed.
	rejected
)

// classify sorts an API error by what retrying it can achieve.
func classify(err error) refusal {
	switch {
	case apierrors.IsConflict(err):
		return conflict
	case apierrors.IsForbidden(err):
		return forbidden
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return rejected
	default:
		return transient
	}
}

// reported: refused tells the user about this error with a Warning Event.
func reported(err error) bool {
	kind := classify(err)
	return kind == forbidden || kind == rejected
}

// apiMessage is the API server's own words for a refusal.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// errRefused is what refused returns for a refusal it has handled (said,
// and retried as its kind needs): the step failed, so apply emits none of
// its announcements, and then returns no error, so that the result refused
// chose is the one the work queue follows. Every caller of refused is
// reached through apply, which takes the mark off; one that is not must
// take it off itself, or the work queue ignores the result.
var errRefused = errors.New("write refused")

// refused turns a failed write into what the user sees and when it is tried
// again: a Warning Event with the API server's message for a refusal that
// retrying alone cannot fix, and no hot loop — a rejected write waits for the
// Job to change (or its Write's RetryAfter), a forbidden one for
// forbiddenRetry. Conflicts retry quietly (these three come with errRefused);
// anything else is returned, with what failed, for the work queue's back-off.
// what describes the request ("creating the mirror"), where the API server.
func (r *JobReconciler) refused(ctx context.Context, job *batchv1.Job, w policy.Write, what, where string, err error) (reconcile.Result, error) {
	kind := classify(err)
	switch kind {
	case conflict:
		return reconcile.Result{RequeueAfter: conflictRetry}, errRefused
	case transient:
		return reconcile.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	logf.FromContext(ctx).Info("write refused", "action", w.Action, "what", what, "cluster", where, "error", err.Error())
	if kind == forbidden {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, w.Reason, w.Action,
			"%s refused %s as forbidden: %s; retrying when the rights change, at the latest in %s", where, what, apiMessage(err), forbiddenRetry)
		return reconcile.Result{RequeueAfter: forbiddenRetry}, errRefused
	}
	if w.RetryAfter > 0 {
		// Nothing on the Job can make it acceptable, and giving it up
		// could leave a stale attempt running: tried again after a while.
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, w.Reason, w.Action,
			"%s rejected %s: %s; retrying in %s", where, what, apiMessage(err), w.RetryAfter)
		return reconcile.Result{RequeueAfter: w.RetryAfter}, errRefused
	}
	r.memory.refusals.remember(job, w)
	until := "the Job changes"
	if w.RetryOnGeneration {
		until = "the Job's spec changes"
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, w.Reason, w.Action,
		"%s rejected %s: %s; not retried until %s", where, what, apiMessage(err), until)
	return reconcile.Result{}, errRefused
}
