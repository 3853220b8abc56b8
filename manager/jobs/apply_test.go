package jobs

import (
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// Every kind of step Next can decide has a handler.
func TestEveryStepKindHasAHandler(t *testing.T) {
	kinds := policy.Kinds()
	for _, kind := range kinds {
		if stepHandlers[kind] == nil {
			t.Errorf("step %s has no handler", kind)
		}
	}
	if len(stepHandlers) != len(kinds) {
		t.Errorf("%d handlers for %d kinds of step", len(stepHandlers), len(kinds))
	}
}

// A queued Job's Dispatched Event says why there when the placement was
// made in an earlier reconcile: from jobferry's Ready check, and only a
// placement's message on the mirror's worker.
func TestPlacementReasonsOfAQueuedJob(t *testing.T) {
	reasons := dispatch.PlacedOn("w1") + "pool general keeps 90% free"
	ready := func(message string) *workload.View {
		return &workload.View{Check: "jobferry", State: kueue.CheckStateReady, Message: message}
	}
	for _, tc := range []struct {
		name, madeNow, worker string
		q                     *workload.View
		want                  string
	}{
		{name: "placed in this reconcile", madeNow: "placed on w1: now", worker: "w1", q: ready(reasons), want: "placed on w1: now"},
		{name: "placed earlier, check Ready", worker: "w1", q: ready(reasons), want: reasons},
		{name: "not queued", worker: "w1", want: ""},
		{name: "check Pending", worker: "w1", q: &workload.View{Check: "jobferry", State: kueue.CheckStatePending, Message: reasons}, want: ""},
		{name: "a Ready message of another worker", worker: "w2", q: ready(reasons), want: ""},
		{name: "a Ready message that only says where", worker: "w1", q: ready("placed on worker cluster w1 (attempt 2)"), want: ""},
	} {
		if got := placementReasons(tc.madeNow, tc.q, tc.worker); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
