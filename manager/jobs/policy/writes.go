package policy

import (
	"slices"
	"time"
)

// A Write jobferry makes for a manager Job (or a notice it gives about
// one), named for the Warning Event a refusal gives and for what must
// change before it is tried again. A refused Write is remembered for the
// Job as it is (State.Blocked), and Next chooses no step that makes it
// until the Job changes, as the Event announces.
type Write struct {
	// Action names the write in the Event (events.k8s.io action).
	Action string
	// Reason is the Event's reason when the API server refuses it.
	Reason string
	// RetryOnGeneration: only a new spec (generation) can make a refused
	// write succeed; otherwise any change of the Job (resourceVersion) can.
	RetryOnGeneration bool
	// RetryAfter, when set, is when a rejected write is tried again,
	// whether or not the Job changed: it is not held back. For the
	// deletion of a mirror, which nothing on the manager Job can make
	// acceptable, and which fences a stale attempt: given up on, the
	// attempt could run beside the next.
	RetryAfter time.Duration
}

// Every Write, declared once here through declare: the reconciler looks
// each one up for every Job (Writes), so none can be refused and then
// forgotten.
var (
	WritePlacement  = declare(Write{Action: "Place", Reason: "PlacementRejected"})
	WriteActivation = declare(Write{Action: "Activate", Reason: "ActivationRejected"})
	WriteNamespace  = declare(Write{Action: "PrepareNamespace", Reason: "NamespaceRejected"})
	WriteMirror     = declare(Write{Action: "CreateMirror", Reason: "MirrorRejected"})
	// The mirror's spec follows the manager Job's spec, so only a new spec
	// can turn a refused update into an accepted one.
	WriteMirrorSpec = declare(Write{Action: "UpdateMirror", Reason: "MirrorUpdateRejected", RetryOnGeneration: true})
	WriteMirrorGone = declare(Write{Action: "DeleteMirror", Reason: "MirrorDeleteRejected", RetryAfter: time.Minute})
	WriteJob        = declare(Write{Action: "Update", Reason: "UpdateRejected"})
	// WriteCheck: jobferry's admission check on a queued Job's Workload.
	WriteCheck = declare(Write{Action: "SetAdmissionCheck", Reason: ReasonCheckRejected})
	// Not writes, but notices given once per version of the Job: its
	// jobferry state is not jobferry's; a mirror its state does not account
	// for exists on a worker.
	NoticeUntrusted = declare(Write{Action: "Verify", Reason: ReasonUntrustedState})
	NoticeStray     = declare(Write{Action: "Dispatch", Reason: ReasonStrayMirror})
	// NoticeOverBudget: the Job holds more than jobferry keeps of one.
	NoticeOverBudget = declare(Write{Action: "Admit", Reason: ReasonOverBudget})
)

var declared []Write

func declare(w Write) Write {
	declared = append(declared, w)
	return w
}

// Writes are every Write declared (a copy): the ones whose refusal the
// reconciler looks up for a Job before Next decides (a Write with
// RetryAfter is never remembered as refused).
func Writes() []Write { return slices.Clone(declared) }
