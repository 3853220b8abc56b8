package jobs

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/metrics"
)

// The steps of a Job Kueue queues (policy/queued.go): jobferry's admission
// check on its Workload, and the placement let go when Kueue took the
// quota back.

// applySetCheck gives jobferry's check on the Workload the state the step
// says; a Ready check carries the placement's reasons when this reconcile
// made it. Kueue's answer (admission, eviction) reconciles the Job again.
func (r *JobReconciler) applySetCheck(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	update := a.st.Check
	if update.State == kueue.CheckStateReady && a.memo.placement != "" {
		update.Message = a.memo.placement
	}
	if err := r.Queue.SetCheck(ctx, a.s.Job.Namespace, *a.s.Queue, update); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteCheck, "setting admission check "+a.s.Queue.Check+" to "+string(update.State), managerAPI, err))
	}
	r.memory.checks.wrote(client.ObjectKeyFromObject(a.s.Job), *a.s.Queue, update)
	if update.State == kueue.CheckStateRetry {
		a.tell.say(a.s.Job, corev1.EventTypeNormal, policy.ReasonRequeued, "SetAdmissionCheck", "admission check %s on Workload %s set Retry: %s", a.s.Queue.Check, a.s.Queue.Workload, update.Message)
	}
	return a.done(nil)
}

// applyRequeue deletes the drained mirror (if any) and lets the placement
// go: Kueue took the quota back.
func (r *JobReconciler) applyRequeue(ctx context.Context, a applyScope) (reconcile.Result, bool, error) {
	if m := a.st.Mirror; m != nil {
		if err := r.deleteMirror(ctx, a.s.Worker, m); err != nil {
			return stop(r.refused(ctx, a.s.Job, policy.WriteMirrorGone, "deleting the mirror Kueue's eviction drained", workerAPI(a.s.Worker), err))
		}
	}
	if err := r.release(ctx, a.s.Job, a.s.Worker, nil); err != nil {
		return stop(r.refused(ctx, a.s.Job, policy.WriteJob, "letting the placement on "+a.s.Worker+" go", managerAPI, err))
	}
	metrics.DispatchTotal.WithLabelValues(a.s.Worker, "requeued").Inc()
	a.tell.say(a.s.Job, corev1.EventTypeNormal, policy.ReasonRequeued, "Requeue", "%s", a.st.Why)
	return a.next()
}
