package policy

import (
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobferry/jobferry/manager/queue/workload"
)

// Kind names what a reconcile does next for a manager Job.
type Kind int

const (
	// StepNone: nothing to do (maybe look again after RequeueAfter).
	StepNone Kind = iota
	// StepFinalize: the Job is gone or being deleted: delete its mirror and
	// let it go.
	StepFinalize
	// StepComplete: completions is 0; complete it on the manager.
	StepComplete
	// StepNotAllowed: the dispatch policy keeps it on the manager (Waiting).
	StepNotAllowed
	// StepShowWaiting: write Waiting into the Suspended condition.
	StepShowWaiting
	// StepPlace: choose a worker and record it (dispatch.Place).
	StepPlace
	// StepCreateMirror: create the mirror on the Job's worker.
	StepCreateMirror
	// StepNameConflict: a Job jobferry did not create holds the name on the
	// worker; exclude the worker and place the Job again.
	StepNameConflict
	// StepRelease: the worker may not take the Job after all (Why); place it
	// again.
	StepRelease
	// StepFence: Mirror is of an earlier Job or attempt; delete it.
	StepFence
	// StepActivate: a Job placed by an earlier version, still held: inject
	// the directives and unsuspend it.
	StepActivate
	// StepUpdateMirror: carry the manager Job's new spec (Changed) to its
	// mirror (Mirror is the updated mirror).
	StepUpdateMirror
	// StepInvalidMirror: the new spec cannot become a mirror (Why).
	StepInvalidMirror
	// StepCopyStatus: write Status, translated from the mirror's.
	StepCopyStatus
	// StepDeleteMirror: the final status is copied; delete the mirror.
	StepDeleteMirror
	// StepWorkerLostWait: the worker is lost, and the Job asks to wait for it.
	StepWorkerLostWait
	// StepRedispatch: the worker is lost; place the Job elsewhere.
	StepRedispatch
	// StepUntrusted: jobferry's state on the Job is not its own (Why): do
	// nothing for it, and say so once per version of the Job.
	StepUntrusted
	// StepOverBudget: the Job holds more than jobferry keeps of one (Why):
	// do nothing for it (a mirror of it that runs is suspended first, as
	// StepUpdateMirror), and say so once per version of the Job.
	StepOverBudget
	// StepRecord: write (and seal) jobferry's state: the UID of the mirror
	// just created (MirrorUID), or the unsealed state of an earlier manager.
	StepRecord
	// StepMirrorNotOurs: the Job holding the mirror's name and labels on the
	// worker is not the one jobferry created (Why): its status is not
	// copied, and the Job is dispatched again as a new attempt.
	StepMirrorNotOurs
	// StepMirrorGone: the mirror was deleted on the worker, not by jobferry
	// (Why): the Job is dispatched again as a new attempt.
	StepMirrorGone
	// StepStray: a mirror of this Job that its state does not account for
	// runs on a worker (Why): nothing is placed or created meanwhile.
	StepStray
	// StepSetCheck: give jobferry's admission check on the queued Job's
	// Workload the state Check says (Ready with the placement, Retry).
	StepSetCheck
	// StepRequeue: Kueue took the queued Job's quota back and its mirror
	// (Mirror, when there is one) has drained: delete it and let the
	// placement go, so the Job is placed afresh when Kueue admits it again.
	StepRequeue
)

// kinds declares every kind of step once: its name, and the Writes a step
// of it makes (its handler's, in package jobs): Next chooses no step one of
// whose Writes is blocked (State.Blocked). A new kind is its constant
// above, its row here, the case of Next that decides it (step.go) and its
// handler (package jobs, apply.go).
var kinds = map[Kind]struct {
	name  string
	makes []Write
}{
	StepNone:        {name: "None"},
	StepFinalize:    {name: "Finalize"},
	StepComplete:    {name: "Complete", makes: []Write{WriteJob}},
	StepNotAllowed:  {name: "NotAllowed"},
	StepShowWaiting: {name: "ShowWaiting"},
	StepPlace:       {name: "Place", makes: []Write{WritePlacement}},
	// Creating a mirror prepares its namespace and may delete the mirror
	// of an earlier attempt first.
	StepCreateMirror:   {name: "CreateMirror", makes: []Write{WriteNamespace, WriteMirror, WriteMirrorGone}},
	StepNameConflict:   {name: "NameConflict", makes: []Write{WriteJob}},
	StepRelease:        {name: "Release", makes: []Write{WriteJob}},
	StepFence:          {name: "Fence", makes: []Write{WriteMirrorGone}},
	StepActivate:       {name: "Activate", makes: []Write{WriteActivation}},
	StepUpdateMirror:   {name: "UpdateMirror", makes: []Write{WriteMirrorSpec}},
	StepInvalidMirror:  {name: "InvalidMirror"},
	StepCopyStatus:     {name: "CopyStatus"},
	StepDeleteMirror:   {name: "DeleteMirror", makes: []Write{WriteMirrorGone}},
	StepWorkerLostWait: {name: "WorkerLostWait"},
	StepRedispatch:     {name: "Redispatch", makes: []Write{WriteJob}},
	StepUntrusted:      {name: "Untrusted", makes: []Write{NoticeUntrusted}},
	StepOverBudget:     {name: "OverBudget", makes: []Write{NoticeOverBudget}},
	StepRecord:         {name: "Record", makes: []Write{WriteJob}},
	StepMirrorNotOurs:  {name: "MirrorNotOurs", makes: []Write{WriteJob}},
	StepMirrorGone:     {name: "MirrorGone", makes: []Write{WriteJob}},
	StepStray:          {name: "Stray", makes: []Write{NoticeStray}},
	StepSetCheck:       {name: "SetCheck", makes: []Write{WriteCheck}},
	StepRequeue:        {name: "Requeue", makes: []Write{WriteMirrorGone, WriteJob}},
}

// Kinds are the kinds of step Next can decide (a copy).
func Kinds() []Kind { return slices.Collect(maps.Keys(kinds)) }

// Step is Next's decision: what to do, and what with.
type Step struct {
	Kind Kind
	// Why explains the step, for an Event or the Waiting message.
	Why string
	// Waiting is what StepShowWaiting and StepNotAllowed write.
	Waiting Waiting
	// Status is what StepCopyStatus writes; Final when it finishes the Job.
	Status batchv1.JobStatus
	Final  bool
	// Mirror is the mirror to fence or delete, or the updated one to write.
	Mirror *batchv1.Job
	// Changed names the spec fields StepUpdateMirror carries.
	Changed []string
	// MirrorUID is what StepRecord records as the mirror's UID ("" to
	// seal the state as it is).
	MirrorUID types.UID
	// RecordQueue is the LocalQueue StepRecord records the Job as queued
	// in ("" to record none).
	RecordQueue string
	// Down is how long the worker has been disconnected.
	Down time.Duration
	// RequeueAfter, when set, is when to look at the Job again.
	RequeueAfter time.Duration
	// Check is what StepSetCheck writes on the queued Job's Workload.
	Check workload.CheckUpdate
	// EventReason, when set, is the reason of the Event StepStray and
	// StepFence record (their usual one otherwise).
	EventReason string
	// InSync: the manager Job shows the mirror's status; a change seen
	// before (the mirror's creation, its spec) left nothing to copy, so it
	// does not start the wait of the next one (StatusBatchPeriod).
	InSync bool
}

func (k Kind) String() string { return kinds[k].name }

// Makes are the Writes a step makes: its kind's, and for a mirror update
// that changes the pod template, the preparation of the worker namespace
// (held to the manager namespace's Pod Security levels).
func Makes(st Step) []Write {
	out := slices.Clone(kinds[st.Kind].makes)
	if st.Kind == StepUpdateMirror && slices.Contains(st.Changed, "template") {
		out = append(out, WriteNamespace)
	}
	return out
}
