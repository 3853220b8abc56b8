package jobs

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// applyScope is what one step is applied with: the Job's key, the state
// readState read, Next's decision, the reconcile's memo and the Events the
// step says (emitted by apply once its writes succeeded).
type applyScope struct {
	key  types.NamespacedName
	s    policy.State
	st   policy.Step
	memo *stepMemo
	tell *announcements
}

// stop ends the reconcile with result.
func stop(result reconcile.Result, err error) (reconcile.Result, bool, error) {
	return result, false, err
}

// stepHandler applies one kind of step: the writes, metrics and memory
// updates it stands for, and the Events it says (a.tell).
type stepHandler func(r *JobReconciler, ctx context.Context, a applyScope) (reconcile.Result, bool, error)

// done ends the reconcile, looked at again when the step says.
func (a applyScope) done(err error) (reconcile.Result, bool, error) {
	return reconcile.Result{RequeueAfter: a.st.RequeueAfter}, false, err
}

// next goes on with the next step: the Job (or its mirror) changed.
func (a applyScope) next() (reconcile.Result, bool, error) { return reconcile.Result{}, true, nil }
