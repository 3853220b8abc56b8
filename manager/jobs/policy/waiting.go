package policy

import (
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the Suspended condition jobferry writes on a manager Job that
// has no mirror whose status could be copied, so that `kubectl get job` shows
// it Suspended, not Running, and `kubectl describe job` says why it waits.
// The mirror's status replaces the condition once the Job runs on a worker.
// Each reason is one cause (the metric jobferry_jobs_waiting is read from
// it); the message says the details.
const (
	// ReasonNoWorkerFits: no worker takes the Job now (the message says
	// why each does not); it is placed once one does.
	ReasonNoWorkerFits = "NoWorkerFits"
	// ReasonInvalidClusterSelector: the Job's cluster selector does not
	// parse; it waits for its user to fix it.
	ReasonInvalidClusterSelector = ReasonInvalidSelector
	// ReasonWaitingForWorker: a worker was chosen, but the manager's API
	// server refused the write that records the placement.
	ReasonWaitingForWorker = "WaitingForWorker"
	// ReasonWorkerNotConnected: placed on a worker that is not connected
	// now (or whose WorkerCluster was deleted); after the worker-lost
	// timeout it is placed elsewhere.
	ReasonWorkerNotConnected = "WorkerNotConnected"
	// ReasonWaitingForMirror: a worker is chosen, but the mirror is not
	// created yet (the worker refused it or its namespace, or it cannot be
	// built).
	ReasonWaitingForMirror = "WaitingForMirror"
	// ReasonQueued: Kueue queues the Job (it names a LocalQueue) and has
	// not admitted it yet; the message says what it waits for.
	ReasonQueued = "Queued"
	// ReasonNoWorkerCanRun: no worker cluster could ever run the queued
	// Job as the workers are (jobferry's admission check Rejected it, and
	// Kueue gave its quota back).
	ReasonNoWorkerCanRun = "NoWorkerCanRun"
	// ReasonQueueLabelRemoved: with Kueue, the Job was seen queued and
	// its queue label was removed since; it is dispatched only through
	// Kueue, so it waits for the label.
	ReasonQueueLabelRemoved = "QueueLabelRemoved"
	// ReasonPodsNotAdmitted: the Job's pods are refused in its namespace
	// on the manager cluster (a LimitRange maximum, a PriorityClass rule,
	// a policy webhook; the message is the admission's own): it is not
	// dispatched until they would be admitted (package tenantlimits).
	ReasonPodsNotAdmitted = "PodsNotAdmitted"
	// ReasonQuotaExceeded: a ResourceQuota of its namespace on the manager
	// cluster has no room for its pods beside the namespace's dispatched,
	// unfinished Jobs (the message names the quota and the resource); it
	// is dispatched once enough of them finish.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonJobSuspended is what kube-controller-manager writes on a Job its
	// user suspended; jobferry writes the same on one it never dispatched.
	ReasonJobSuspended = "JobSuspended"
)

// workerNotConnected is how a Waiting message says the worker is down.
const workerNotConnected = "the worker cluster is not connected"

// Waiting says why a manager Job without a mirror does not run.
type Waiting struct {
	Reason, Message string
}

func UserSuspendedWaiting() Waiting { return Waiting{ReasonJobSuspended, "Job suspended"} }

// WaitingForWorker: not placed yet, for reason (ReasonNoWorkerFits,
// ReasonInvalidClusterSelector, ReasonWaitingForWorker).
func WaitingForWorker(reason, format string, args ...any) Waiting {
	return Waiting{reason, "waiting to be dispatched to a worker cluster: " + fmt.Sprintf(format, args...)}
}

// WaitingForMirror: placed on worker, its mirror not created yet for
// reason (ReasonWorkerNotConnected, ReasonWaitingForMirror).
func WaitingForMirror(reason, worker, format string, args ...any) Waiting {
	return Waiting{reason, fmt.Sprintf("placed on worker cluster %s; ", worker) + fmt.Sprintf(format, args...)}
}

// PendingStatus returns status with a True Suspended condition saying why the
// Job waits, and whether that is worth a write: a new reason or message is
// (the messages carry no figures that change by themselves: "no worker fits"
// says which resource is short, the Event how much). Nothing else of
// the status changes, so every Job status validation rule that held still
// holds (Suspended is not among the conditions the API server guards).
func PendingStatus(status batchv1.JobStatus, w Waiting, now time.Time) (batchv1.JobStatus, bool) {
	out := *status.DeepCopy()
	for i := range out.Conditions {
		c := &out.Conditions[i]
		if c.Type != batchv1.JobSuspended {
			continue
		}
		switch {
		case c.Status == corev1.ConditionTrue && c.Reason == w.Reason && c.Message == w.Message:
			return status, false
		case c.Status != corev1.ConditionTrue:
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = corev1.ConditionTrue, w.Reason, w.Message, metav1.NewTime(now)
		return out, true
	}
	out.Conditions = append(out.Conditions, batchv1.JobCondition{
		Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: w.Reason, Message: w.Message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
	return out, true
}

// Reasons of jobferry_jobs_waiting: why an unfinished manager Job does not
// run, read back from the reason of the condition jobferry wrote on it
// (JobWaiting).
const (
	WaitingUserSuspended   = "user_suspended"
	WaitingNotAllowed      = "not_allowed"
	WaitingNoWorkerFits    = "no_worker_fits"
	WaitingInvalidSelector = "invalid_selector"
	// WaitingPlacementRefused: the manager's API server refused the write
	// that records the placement.
	WaitingPlacementRefused = "placement_refused"
	// WaitingWorkerLost: placed on a worker that is not connected now.
	WaitingWorkerLost = "worker_lost"
	// WaitingMirrorRefused: the worker refused the mirror (or its
	// namespace), or the mirror cannot be built.
	WaitingMirrorRefused = "mirror_refused"
	// WaitingQueued: queued in Kueue, not admitted yet.
	WaitingQueued = "queued"
	// WaitingNoWorkerCanRun: no worker could ever run it (Rejected).
	WaitingNoWorkerCanRun = "no_worker_can_run"
	// WaitingPodsNotAdmitted: its namespace refuses its pods.
	WaitingPodsNotAdmitted = "pods_not_admitted"
	// WaitingQuotaExceeded: its namespace's quota is full.
	WaitingQuotaExceeded = "quota_exceeded"
)

var waitingReasons = []string{WaitingUserSuspended, WaitingNotAllowed, WaitingNoWorkerFits, WaitingInvalidSelector,
	WaitingPlacementRefused, WaitingWorkerLost, WaitingMirrorRefused, WaitingQueued, WaitingNoWorkerCanRun,
	WaitingPodsNotAdmitted, WaitingQuotaExceeded}

// WaitingReasons are the reason label values of jobferry_jobs_waiting, one
// series each (a copy).
func WaitingReasons() []string { return slices.Clone(waitingReasons) }

// waitingByReason maps the reasons of the Suspended condition to the
// metric's.
var waitingByReason = map[string]string{
	ReasonJobSuspended:           WaitingUserSuspended,
	ReasonNotAllowed:             WaitingNotAllowed,
	ReasonNoWorkerFits:           WaitingNoWorkerFits,
	ReasonInvalidClusterSelector: WaitingInvalidSelector,
	ReasonWaitingForWorker:       WaitingPlacementRefused,
	ReasonWorkerNotConnected:     WaitingWorkerLost,
	ReasonWaitingForMirror:       WaitingMirrorRefused,
	ReasonQueued:                 WaitingQueued,
	ReasonQueueLabelRemoved:      WaitingQueued,
	ReasonNoWorkerCanRun:         WaitingNoWorkerCanRun,
	ReasonPodsNotAdmitted:        WaitingPodsNotAdmitted,
	ReasonQuotaExceeded:          WaitingQuotaExceeded,
}

// JobWaiting says why an unfinished manager Job does not run ("" when it
// runs, or is finished): its worker is lost (workerDown), or the reason of
// the Suspended condition jobferry (or the worker, for a suspended mirror)
// wrote says why.
func JobWaiting(job *batchv1.Job, workerDown bool) string {
	if IsFinished(job) {
		return ""
	}
	if workerDown {
		return WaitingWorkerLost
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return waitingByReason[c.Reason]
		}
	}
	return ""
}

// PodsNotAdmitted is the waiting a refusal of the Job's pods gives it.
func PodsNotAdmitted(namespace, refused string) Waiting {
	return WaitingForWorker(ReasonPodsNotAdmitted, "namespace %s of this cluster does not admit its pods, so jobferry does not dispatch it: %s", namespace, refused)
}

// PodsRecheck is how soon a Job whose pods were refused is asked about
// again: the namespace's LimitRanges and policies are not watched.
const PodsRecheck = time.Minute
