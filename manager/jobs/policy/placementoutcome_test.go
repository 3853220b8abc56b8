package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

func TestPlacement(t *testing.T) {
	noRoom := dispatch.Decision{
		Rejected: map[string]string{"w1": "insufficient cpu: 2 requested, 1 free"},
		Gists:    map[string]string{"w1": "insufficient cpu"},
		Codes:    map[string]string{"w1": dispatch.ReasonInsufficientCapacity},
	}
	keptOff := dispatch.Decision{
		Rejected: map[string]string{"w1": "namespace team-a is missing there"},
		Codes:    map[string]string{"w1": dispatch.ReasonNamespaceMissing},
	}
	queued := &workload.View{Queue: "team", Workload: "job-train", Check: "jobferry"}
	cases := map[string]struct {
		decision dispatch.Decision
		invalid  error
		never    string
		q        *workload.View
		want     policy.PlacementKind
		// waiting, event: what the condition and the Event say (parts).
		waitingReason, waiting, eventReason, event string
		check                                      kueue.CheckState
		requeue                                    time.Duration
	}{
		"an invalid selector waits for its user, whatever else": {
			decision: noRoom, invalid: errors.New(`selector "zone in (a": unexpected end`), q: queued, never: "too big",
			want: policy.PlacementInvalidSelector, waitingReason: policy.ReasonInvalidClusterSelector, waiting: "unexpected end",
			eventReason: policy.ReasonInvalidSelector, event: `selector "zone in (a"`,
		},
		"placed": {
			decision: dispatch.Decision{Worker: "w1", Pool: "general"}, q: queued, want: policy.PlacementPlaced,
		},
		"queued, and no worker could ever run it: the check Rejected": {
			decision: noRoom, never: "it requests 64 cpu; the largest pool has 8", q: queued,
			want: policy.PlacementRejected, waitingReason: policy.ReasonNoWorkerCanRun, waiting: "could ever run this Job as the workers are: it requests 64 cpu",
			eventReason: policy.ReasonNoWorkerCanRun, event: "admission check jobferry on Workload job-train is Rejected", check: kueue.CheckStateRejected,
		},
		"queued without jobferry's check, and no worker could ever run it: it waits": {
			decision: noRoom, never: "too big", q: &workload.View{Queue: "team", Workload: "job-train"},
			want: policy.PlacementWaits, waitingReason: policy.ReasonNoWorkerFits, waiting: "insufficient cpu",
			eventReason: policy.ReasonUnschedulable, event: "1 free", requeue: policy.PlacementWaitsFor,
		},
		"no room now: it waits, the condition without the figures, the Event with them": {
			decision: noRoom, want: policy.PlacementWaits, waitingReason: policy.ReasonNoWorkerFits, waiting: "insufficient cpu",
			eventReason: policy.ReasonUnschedulable, event: "2 requested, 1 free", requeue: policy.PlacementWaitsFor,
		},
		"kept off by namespaces alone: looked at again sooner": {
			decision: keptOff, want: policy.PlacementWaits, waitingReason: policy.ReasonNoWorkerFits, waiting: "namespace team-a is missing",
			eventReason: policy.ReasonUnschedulable, event: "namespace team-a is missing", requeue: policy.NamespaceRecheck,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := policy.Placement(tc.decision, tc.invalid, tc.never, tc.q)
			if got.Kind != tc.want {
				t.Fatalf("kind %s, want %s", got.Kind, tc.want)
			}
			if got.Waiting.Reason != tc.waitingReason || !strings.Contains(got.Waiting.Message, tc.waiting) {
				t.Errorf("waiting %s %q, want %s saying %q", got.Waiting.Reason, got.Waiting.Message, tc.waitingReason, tc.waiting)
			}
			if got.EventReason != tc.eventReason || !strings.Contains(got.EventMessage, tc.event) {
				t.Errorf("event %s %q, want %s saying %q", got.EventReason, got.EventMessage, tc.eventReason, tc.event)
			}
			if got.Check.State != tc.check || got.RequeueAfter != tc.requeue {
				t.Errorf("check %q, requeue %s; want %q, %s", got.Check.State, got.RequeueAfter, tc.check, tc.requeue)
			}
			if strings.Contains(got.Waiting.Message, "1 free") {
				t.Errorf("the condition carries a figure that changes with every capacity summary: %q", got.Waiting.Message)
			}
		})
	}
}
