package policy

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// The part of Next for a Job Kueue queues (State.Queue): Kueue
// decides when it runs — it reserves quota, asks jobferry's admission check,
// unsuspends the Job once every check is Ready, and suspends it to evict or
// preempt it — and jobferry decides where. So jobferry places a queued Job
// only once Kueue reserved quota for it with jobferry's check Pending,
// reports the placement as the check Ready (the worker's directives as pod
// set updates, which Kueue injects into the Job as it admits it), creates
// the mirror only once Kueue unsuspended the Job, and never unsuspends it
// itself. When Kueue suspends it, the mirror is suspended too (the spec
// follows, nextMirrorSpec) and its status still copied, so Kueue sees the
// pods go; once the mirror drained, the placement goes (StepRequeue) and
// the Job is placed afresh when Kueue admits it again. A placement jobferry
// gives up itself (the worker lost, the mirror deleted there) turns the
// check Retry, so Kueue evicts the Job and queues it again.

// nextQueuedUnplaced decides for a queued Job that is not placed.
func nextQueuedUnplaced(s State) Step {
	q, job := s.Queue, s.Job
	switch {
	case ptr.Deref(job.Spec.Suspend, false) && counted(job.Status):
		// Pods of a placement let go still count on the Job (its worker
		// was lost with them): Kueue holds the quota, and restores the
		// Job's template, only once none do.
		return Step{Kind: StepCopyStatus, Status: uncounted(job.Status)}
	case q.Workload == "":
		// Kueue makes it at once; its creation reconciles the Job. A
		// condition written meanwhile would be a write per Job, read by
		// Kueue too, for a state of milliseconds.
		return Step{Kind: StepNone}
	case q.Deactivated:
		if c := jobstatus.Condition(job.Status, batchv1.JobSuspended); c != nil && (c.Reason == ReasonNoWorkerCanRun || c.Reason == ReasonPodsNotAdmitted) {
			// Kueue deactivated it because jobferry's check Rejected it
			// (and reset the check): the Job says why already.
			return Step{Kind: StepNone}
		}
		return Step{Kind: StepShowWaiting, Waiting: QueuedWaiting(q, "Kueue does not queue it (deactivated: "+q.Why+"); set its Workload's spec.active to queue it again")}
	case q.Check == "":
		return nextWithoutCheck(q)
	case staleCheck(q):
		// jobferry's check says Ready or Retry on a Workload Kueue took the
		// quota of already: left by a write that landed after Kueue's
		// eviction (a manager from before checks were written only on the
		// Workload as read). Kueue acts on neither now (on a Retry only by
		// evicting; on a Ready at the next reservation, with a placement
		// let go); Pending queues the Job again.
		return setCheck(s, workload.CheckUpdate{State: kueue.CheckStatePending, Message: fmt.Sprintf(
			"Kueue took the quota of attempt %d back; jobferry places the Job afresh once Kueue reserves quota again", jobstate.Attempt(job))})
	case q.State == kueue.CheckStateReady:
		// jobferry reported a placement it has since let go (its worker was
		// lost, its mirror deleted there): the Job must not run on what
		// Kueue admitted, so Kueue evicts it, restores its template and
		// queues it again.
		return setCheck(s, workload.CheckUpdate{State: kueue.CheckStateRetry, Message: fmt.Sprintf(
			"jobferry let the placement of attempt %d go; the Job is placed afresh once Kueue admits it again", jobstate.Attempt(job))})
	case q.State == kueue.CheckStateRetry || q.State == kueue.CheckStateRejected:
		if q.State == kueue.CheckStateRejected {
			return Step{Kind: StepShowWaiting, Waiting: WaitingForWorker(ReasonNoWorkerCanRun, "%s", q.Message)}
		}
		return Step{Kind: StepShowWaiting, Waiting: QueuedWaiting(q, "Kueue queues it again (check "+q.Check+" Retry: "+q.Message+")")}
	case !q.QuotaReserved || q.Evicted:
		// Quota still reserved while Kueue evicts is quota on its way out.
		return Step{Kind: StepShowWaiting, Waiting: QueuedWaiting(q, "waiting for Kueue to reserve quota")}
	}
	return Step{Kind: StepPlace}
}

// staleCheck: jobferry's check is Ready or Retry on a Workload Kueue
// evicted already (Kueue resets every check to Pending as it evicts, so
// these came after), or Ready on one it holds no quota for.
func staleCheck(q *workload.View) bool {
	switch q.State {
	case kueue.CheckStateRetry:
		return q.Evicted
	case kueue.CheckStateReady:
		return q.Evicted || !q.QuotaReserved
	}
	return false
}

// nextWithoutCheck decides for a queued Job whose Workload does not list
// jobferry's check: Kueue admits it alone when its ClusterQueue names none
// of jobferry's checks, and jobferry places it once Kueue did.
func nextWithoutCheck(q *workload.View) Step {
	switch {
	case q.Admitted && !q.Evicted:
		return Step{Kind: StepPlace}
	case !q.QuotaReserved:
		return Step{Kind: StepShowWaiting, Waiting: QueuedWaiting(q, "waiting for Kueue to reserve quota")}
	case !q.ChecksListed:
		// Kueue reserved quota before listing the ClusterQueue's checks on
		// the Workload, which it does next (or admits it, when there are
		// none): either reconciles the Job. A condition written meanwhile
		// would be a write per Job, and it could not say which it is.
		return Step{Kind: StepNone}
	}
	return Step{Kind: StepShowWaiting, Waiting: QueuedWaiting(q,
		"waiting for Kueue to admit it (its ClusterQueue names none of jobferry's admission checks, so it is placed once admitted)")}
}

// nextQueuedWithoutMirror decides for a queued Job placed on a connected
// worker, without a mirror there: while Kueue has not unsuspended it, the
// placement is reported to Kueue (or let go, when Kueue took the quota
// back); once it has, the mirror is created as for any Job (ok false).
func nextQueuedWithoutMirror(s State) (Step, bool) {
	q, job := s.Queue, s.Job
	if !ptr.Deref(job.Spec.Suspend, false) {
		if !q.Admitted || q.Evicted || q.Deactivated {
			// Unsuspended, but the Workload is not admitted: its tenant
			// unsuspended it (Kueue suspends it again), or the cache shows
			// Kueue's unsuspension before its admission. A mirror now
			// would run without the quota Kueue admits it with. Nothing is
			// written: in the second case the admission, a moment later,
			// reconciles the Job and the mirror is created then.
			return Step{Kind: StepNone, RequeueAfter: 5 * time.Second}, true
		}
		return Step{}, false
	}
	if st := nextWithoutMirror(s); st.Kind != StepCreateMirror {
		// The worker may no longer take it, a mirror is on its way, ...
		return st, true
	}
	switch {
	case q.Check == "" || !q.QuotaReserved || q.Evicted || q.State == kueue.CheckStateRetry || q.State == kueue.CheckStateRejected:
		// Kueue took the quota back (or suspended a Job it admitted
		// without jobferry's check) before the mirror was made.
		return requeueStep(s, nil), true
	case s.WorkerCluster == nil:
		return Step{Kind: StepNone, RequeueAfter: time.Second}, true
	}
	ready := workload.CheckUpdate{State: kueue.CheckStateReady,
		Message: fmt.Sprintf("placed on worker cluster %s (attempt %d)", s.Worker, jobstate.Attempt(job)),
		Updates: workload.PlacementUpdates(q.PodSets, s.Worker, s.WorkerCluster.Spec.Scheduling)}
	if ready.Unchanged(*q) {
		// Kueue admits it next: its unsuspension reconciles the Job.
		return Step{Kind: StepNone}, true
	}
	return setCheck(s, ready), true
}

// setCheck is the step that gives jobferry's check the state u says,
// unless the API server refused that write for the Job as it is now.
func setCheck(s State, u workload.CheckUpdate) Step {
	if s.Blocked[WriteCheck] {
		return Step{Kind: StepNone}
	}
	return Step{Kind: StepSetCheck, Check: u}
}

// drained: Kueue suspended the Job, its mirror is suspended too, and no pod
// of it is left (nor the status's copy says so: the status is copied first).
func drained(job, m *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false) && ptr.Deref(m.Spec.Suspend, false) && !jobstatus.Finished(m.Status) && !counted(m.Status)
}

// counted: the status counts pods that are running or terminating.
func counted(status batchv1.JobStatus) bool {
	return status.Active > 0 || ptr.Deref(status.Ready, 0) > 0 || ptr.Deref(status.Terminating, 0) > 0
}

// uncounted is a status that counts no running or terminating pod.
func uncounted(status batchv1.JobStatus) batchv1.JobStatus {
	out := *status.DeepCopy()
	out.Active = 0
	if out.Ready != nil {
		out.Ready = ptr.To[int32](0)
	}
	if out.Terminating != nil {
		out.Terminating = ptr.To[int32](0)
	}
	return out
}

// requeueStep lets the placement of a Job Kueue took the quota of go, with
// its drained mirror m (nil when none was made).
func requeueStep(s State, m *batchv1.Job) Step {
	return Step{Kind: StepRequeue, Mirror: m, Why: fmt.Sprintf(
		"Kueue took back the quota of Workload %s (evicted or preempted); jobferry lets attempt %d on %s go and places the Job afresh once Kueue admits it again",
		s.Queue.Workload, jobstate.Attempt(s.Job), s.Worker)}
}

// QueuedWaiting: a queued Job not placed, for why.
func QueuedWaiting(q *workload.View, why string) Waiting {
	where := "LocalQueue " + q.Queue
	if q.Workload != "" {
		where += " (Workload " + q.Workload + ")"
	}
	return Waiting{ReasonQueued, fmt.Sprintf("queued in Kueue's %s: %s", where, why)}
}
