package jobs

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// stepHandlers are the handlers of every kind of step, each in the file of
// its concern: notices here, placement writes in applyplacement.go, mirror
// writes in applymirror.go, Kueue's check in applyqueue.go.
var stepHandlers = map[policy.Kind]stepHandler{
	policy.StepNone:           (*JobReconciler).applyNone,
	policy.StepFinalize:       (*JobReconciler).applyFinalize,
	policy.StepNotAllowed:     (*JobReconciler).applyNotAllowed,
	policy.StepShowWaiting:    (*JobReconciler).applyShowWaiting,
	policy.StepWorkerLostWait: (*JobReconciler).applyWorkerLostWait,
	policy.StepUntrusted:      (*JobReconciler).applyUntrusted,
	policy.StepOverBudget:     (*JobReconciler).applyOverBudget,
	policy.StepStray:          (*JobReconciler).applyStray,
	policy.StepComplete:       (*JobReconciler).applyComplete,
	policy.StepPlace:          (*JobReconciler).applyPlace,
	policy.StepActivate:       (*JobReconciler).applyActivate,
	policy.StepRecord:         (*JobReconciler).applyRecord,
	policy.StepNameConflict:   (*JobReconciler).applyNameConflict,
	policy.StepRelease:        (*JobReconciler).applyRelease,
	policy.StepRedispatch:     (*JobReconciler).applyRedispatch,
	policy.StepMirrorNotOurs:  (*JobReconciler).applyMirrorReplaced,
	policy.StepMirrorGone:     (*JobReconciler).applyMirrorReplaced,
	policy.StepCreateMirror:   (*JobReconciler).applyCreateMirror,
	policy.StepFence:          (*JobReconciler).applyFence,
	policy.StepUpdateMirror:   (*JobReconciler).applyUpdateMirror,
	policy.StepInvalidMirror:  (*JobReconciler).applyInvalidMirror,
	policy.StepCopyStatus:     (*JobReconciler).applyCopyStatus,
	policy.StepDeleteMirror:   (*JobReconciler).applyDeleteMirror,
	policy.StepSetCheck:       (*JobReconciler).applySetCheck,
	policy.StepRequeue:        (*JobReconciler).applyRequeue,
}

// apply does what Next decided, emits the Events the step said when none of
// its writes failed, and says whether the reconcile goes on with the next
// step.
func (r *JobReconciler) apply(ctx context.Context, key types.NamespacedName, s policy.State, st policy.Step, memo *stepMemo) (reconcile.Result, bool, error) {
	if st.InSync {
		r.memory.observed.take(key)
	}
	handle, ok := stepHandlers[st.Kind]
	if !ok {
		return reconcile.Result{}, false, fmt.Errorf("no handler for step %s", st.Kind)
	}
	var tell announcements
	result, more, err := handle(r, ctx, applyScope{key: key, s: s, st: st, memo: memo, tell: &tell})
	tell.emit(r.Recorder, err != nil)
	if errors.Is(err, errRefused) {
		// Said and retried as refused decided.
		return result, false, nil
	}
	return result, more, err
}

// applyNone: nothing to write; a finished Job's assumed capacity ends.
func (r *JobReconciler) applyNone(_ context.Context, a applyScope) (reconcile.Result, bool, error) {
	if job := a.s.Job; job != nil && a.s.Worker != "" && (policy.IsFinished(job) || a.s.WroteFinished) {
		r.placing.assume.forget(job.UID)
	}
	return a.done(nil)
}

func (r *JobReconciler) applyFinalize(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	return a.done(r.finalize(ctx, a.key, a.s.Job))
}

// applyNotAllowed shows why the dispatch policy keeps the Job, with an
// Event when that is news.
func (r *JobReconciler) applyNotAllowed(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	wrote, err := r.updateWaiting(ctx, a.s.Job, a.st.Waiting)
	if wrote {
		a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.ReasonNotAllowed, "Place", "%s", a.st.Waiting.Message)
	}
	return a.done(err)
}

func (r *JobReconciler) applyShowWaiting(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	return a.done(r.showWaiting(ctx, a.s.Job, a.st.Waiting))
}

func (r *JobReconciler) applyWorkerLostWait(_ context.Context, a applyScope) (reconcile.Result, bool, error) {
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.ReasonWorkerLost, "Redispatch", "%s", a.st.Why)
	return a.done(nil)
}

// applyUntrusted says, once per version of the Job, that its jobferry
// state is not jobferry's; nothing else is done with it.
func (r *JobReconciler) applyUntrusted(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	r.memory.refusals.remember(a.s.Job, policy.NoticeUntrusted)
	logf.FromContext(ctx).Info("not acting on a Job whose jobferry state is not jobferry's", "annotations", a.s.Untrusted)
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.NoticeUntrusted.Reason, policy.NoticeUntrusted.Action, "%s", a.st.Why)
	return a.done(nil)
}

// applyOverBudget says, once per version of the Job, that it holds more
// than jobferry keeps of one; nothing else is done with it.
func (r *JobReconciler) applyOverBudget(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	r.memory.refusals.remember(a.s.Job, policy.NoticeOverBudget)
	logf.FromContext(ctx).Info("not acting on a Job over the cache's budget", "why", a.st.Why)
	a.tell.say(a.s.Job, corev1.EventTypeWarning, policy.NoticeOverBudget.Reason, policy.NoticeOverBudget.Action, "%s", a.st.Why)
	return a.done(nil)
}

// applyStray says, once per version of the Job, that a mirror its state
// does not account for runs on a worker.
func (r *JobReconciler) applyStray(_ context.Context, a applyScope) (reconcile.Result, bool, error) {
	r.memory.refusals.remember(a.s.Job, policy.NoticeStray)
	reason := policy.NoticeStray.Reason
	if a.st.EventReason != "" {
		reason = a.st.EventReason
	}
	a.tell.say(a.s.Job, corev1.EventTypeWarning, reason, policy.NoticeStray.Action, "%s", a.st.Why)
	return a.done(nil)
}
