package policy

import "slices"

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
	WriteMirrorGone = declare(Write{Action: "DeleteMirror", Reason: "MirrorDeleteRejected"})
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
// reconciler looks up for a Job before Next decides.
func Writes() []Write { return slices.Clone(declared) }

// makes names the Writes a step of each kind makes (its handler's): Next
// chooses no step one of whose Writes is blocked (State.Blocked).
var makes = map[Kind][]Write{
	StepComplete:      {WriteJob},
	StepPlace:         {WritePlacement},
	StepActivate:      {WriteActivation},
	StepRecord:        {WriteJob},
	StepNameConflict:  {WriteJob},
	StepRelease:       {WriteJob},
	StepRedispatch:    {WriteJob},
	StepMirrorNotOurs: {WriteJob},
	StepMirrorGone:    {WriteJob},
	// Creating a mirror prepares its namespace and may delete the mirror
	// of an earlier attempt first.
	StepCreateMirror: {WriteNamespace, WriteMirror, WriteMirrorGone},
	StepUpdateMirror: {WriteNamespace, WriteMirrorSpec},
	StepFence:        {WriteMirrorGone},
	StepDeleteMirror: {WriteMirrorGone},
	StepRequeue:      {WriteMirrorGone, WriteJob},
	StepSetCheck:     {WriteCheck},
	StepUntrusted:    {NoticeUntrusted},
	StepStray:        {NoticeStray},
	StepOverBudget:   {NoticeOverBudget},
}

// Makes are the Writes a step of kind k makes (a copy).
func Makes(k Kind) []Write { return slices.Clone(makes[k]) }
