package policy

import (
	"fmt"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// PlacementKind is what an attempt to place a Job comes to.
type PlacementKind int

const (
	// PlacementInvalidSelector: the Job's cluster selector does not parse;
	// it waits for its user to fix it.
	PlacementInvalidSelector PlacementKind = iota
	// PlacementRejected: Kueue queues the Job and no worker could ever run
	// it as the workers are: jobferry's check on its Workload turns
	// Rejected, so that Kueue gives its quota back.
	PlacementRejected
	// PlacementWaits: no worker takes it now; it waits (in the waiting
	// room, woken when capacity or a worker changes) and says why.
	PlacementWaits
	// PlacementPlaced: a worker was chosen; the placement is recorded next.
	PlacementPlaced
)

var placementNames = map[PlacementKind]string{
	PlacementInvalidSelector: "InvalidSelector", PlacementRejected: "Rejected", PlacementWaits: "Waits", PlacementPlaced: "Placed",
}

func (k PlacementKind) String() string { return placementNames[k] }

// PlacementOutcome is what the reconciler does with a placement decision.
type PlacementOutcome struct {
	Kind PlacementKind
	// Waiting is what the Job's Suspended condition says (all but Placed).
	Waiting Waiting
	// EventReason and EventMessage are the Warning Event that goes with
	// the outcome (with a change of Waiting only, for PlacementWaits: under
	// load every capacity change retries every waiting Job).
	EventReason, EventMessage string
	// Check is what jobferry's admission check turns to (PlacementRejected).
	Check workload.CheckUpdate
	// RequeueAfter is when the Job is looked at again without a wake-up
	// (PlacementWaits: a safety net, sooner where a worker's namespace kept
	// it off, as nothing watched says when that changes).
	RequeueAfter time.Duration
}

// PlacementWaitsFor is how long a waiting Job goes without a look unless
// woken: the waiting room wakes it when capacity or a worker changes.
const PlacementWaitsFor = 5 * time.Minute

// Placement decides among the four outcomes of dispatch.Place for a Job:
// invalid says what is wrong with the Job itself, never (when nothing was
// placed) why no worker could ever run it ("" when one might), q is its
// Workload when Kueue queues it.
func Placement(d dispatch.Decision, invalid error, never string, q *workload.View) PlacementOutcome {
	switch {
	case invalid != nil:
		return PlacementOutcome{Kind: PlacementInvalidSelector, Waiting: WaitingForWorker(ReasonInvalidClusterSelector, "%v", invalid),
			EventReason: ReasonInvalidSelector, EventMessage: invalid.Error()}
	case d.Placed():
		return PlacementOutcome{Kind: PlacementPlaced}
	case q != nil && q.Check != "" && never != "":
		message := "no worker cluster could ever run this Job as the workers are: " + never
		return PlacementOutcome{Kind: PlacementRejected, Waiting: WaitingForWorker(ReasonNoWorkerCanRun, "%s", message),
			Check:       workload.CheckUpdate{State: kueue.CheckStateRejected, Message: message},
			EventReason: ReasonNoWorkerCanRun, EventMessage: fmt.Sprintf("%s; jobferry's admission check %s on Workload %s is Rejected", message, q.Check, q.Workload)}
	}
	retry := PlacementWaitsFor
	if KeptOffByNamespace(d) {
		retry = NamespaceRecheck
	}
	// The condition says the gist (no free amounts, which change with
	// every capacity summary); the Event the figures.
	return PlacementOutcome{Kind: PlacementWaits, Waiting: WaitingForWorker(ReasonNoWorkerFits, "%s", d.Gist()),
		EventReason: ReasonUnschedulable, EventMessage: d.Summary(), RequeueAfter: retry}
}
