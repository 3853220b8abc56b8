package policy

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
)

func nextWithoutMirror(s State) Step {
	job := s.Job
	switch {
	case IsFinished(job) || s.WroteFinished:
		// The finished mirror is deleted already.
		return Step{Kind: StepNone}
	case s.MirrorExpected && s.MirrorUID == "" && s.CreatedMirrorUID != "":
		// Recorded at once, not when the worker's cache shows it.
		return Step{Kind: StepRecord, MirrorUID: s.CreatedMirrorUID}
	case s.MirrorExpected:
		// Its add event reconciles the Job again; creating it again would
		// only be refused as existing.
		return Step{Kind: StepNone, RequeueAfter: 5 * time.Second}
	case s.MirrorUID != "" && s.HiddenMirror != nil && s.HiddenMirror.DeletionTimestamp != nil:
		// Fenced, or deleted by someone: gone once its finalizers are
		// (each look is a read from the worker: not every second).
		return Step{Kind: StepNone, RequeueAfter: 10 * time.Second}
	case s.MirrorUID != "" && s.HiddenMirror != nil:
		// Still running, and out of the cache's sight (so of fencing's and
		// the orphan collector's): deleted first, so that the next attempt
		// does not run beside it.
		return Step{Kind: StepFence, Mirror: s.HiddenMirror, RequeueAfter: time.Second, Why: fmt.Sprintf(
			"its mirror on %s (UID %s) is no longer seen as jobferry's there (its labels were changed, or its namespace holds more Jobs that look like jobferry's than the manager keeps): it is deleted, and this Job dispatched again",
			s.Worker, s.MirrorUID)}
	case s.MirrorUID != "" && s.MirrorFenced:
		return Step{Kind: StepMirrorGone, Why: fmt.Sprintf(
			"its mirror on %s (UID %s), deleted by jobferry as no longer seen as jobferry's there, is gone: this Job is dispatched again as attempt %d",
			s.Worker, s.MirrorUID, jobstate.Attempt(job)+1)}
	case s.MirrorUID != "":
		// jobferry created it and did not delete it (a manager that deletes
		// a mirror either moves the Job on or finished it).
		return Step{Kind: StepMirrorGone, Why: fmt.Sprintf(
			"its mirror on %s (UID %s) was deleted there, not by jobferry (by someone on the worker, or with its namespace): this Job is dispatched again as attempt %d",
			s.Worker, s.MirrorUID, jobstate.Attempt(job)+1)}
	case s.Refusal != nil:
		// The policy holds at every mirror create, however the Job came to
		// be placed.
		return Step{Kind: StepNotAllowed, RequeueAfter: time.Minute, Waiting: Waiting{ReasonNotAllowed,
			fmt.Sprintf("jobferry does not dispatch this Job (rule: %s): %s", s.Refusal.Rule, s.Refusal.Message)}}
	case s.PodsRefused != "":
		// Its template changed since it was placed, and its namespace
		// refuses the new pods.
		return Step{Kind: StepShowWaiting, RequeueAfter: PodsRecheck, Waiting: WaitingForMirror(ReasonPodsNotAdmitted, s.Worker,
			"namespace %s of this cluster does not admit its pods, so jobferry does not create its mirror: %s", job.Namespace, s.PodsRefused)}
	case s.Foreign != nil:
		return Step{Kind: StepNameConflict, Why: fmt.Sprintf(
			"a Job %s/%s not created by jobferry exists on %s; it is left untouched and this Job is placed elsewhere", job.Namespace, job.Name, s.Worker)}
	case !s.Connection.MayUse:
		// The WorkerCluster's namespaces changed since the placement.
		return Step{Kind: StepRelease, Why: fmt.Sprintf("worker cluster %s takes Jobs from namespaces %s only (spec.namespaces); the Job is placed again",
			s.Worker, strings.Join(s.Connection.Namespaces, ", "))}
	case s.Connection.MirrorsForbidden != "":
		return Step{Kind: StepRelease, Why: fmt.Sprintf("worker cluster %s: %s; the Job is placed again (see the WorkerCluster's %s condition)",
			s.Worker, s.Connection.MirrorsForbidden, v1alpha1.ConditionAuthorized)}
	case s.WorkerRejects != "":
		return Step{Kind: StepRelease, Why: fmt.Sprintf("worker cluster %s may no longer take this Job: %s; the Job is placed again", s.Worker, s.WorkerRejects)}
	case s.Blocked[WriteMirror] || s.Blocked[WriteNamespace]:
		return Step{Kind: StepNone}
	case s.WorkerCluster == nil:
		// Deleted since the placement; its connection goes with it.
		return Step{Kind: StepNone, RequeueAfter: time.Second}
	}
	return Step{Kind: StepCreateMirror}
}
