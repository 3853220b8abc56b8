package jobs

import (
	"context"
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
	// reasonJobSuspended is what kube-controller-manager writes on a Job its
	// user suspended; jobferry writes the same on one it never dispatched.
	reasonJobSuspended = "JobSuspended"
)

// workerNotConnected is how a Waiting message says the worker is down.
const workerNotConnected = "the worker cluster is not connected"

// Waiting says why a manager Job without a mirror does not run.
type Waiting struct {
	Reason, Message string
}

func UserSuspendedWaiting() Waiting { return Waiting{reasonJobSuspended, "Job suspended"} }

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

// showWaiting writes why the Job waits onto its status, unless it is finished
// or already says so. The Job object is updated with what was written.
func (r *JobReconciler) showWaiting(ctx context.Context, job *batchv1.Job, w Waiting) error {
	_, err := r.updateWaiting(ctx, job, w)
	return err
}

// updateWaiting is showWaiting, reporting whether it wrote.
func (r *JobReconciler) updateWaiting(ctx context.Context, job *batchv1.Job, w Waiting) (bool, error) {
	if IsFinished(job) {
		return false, nil
	}
	status, changed := PendingStatus(job.Status, w, r.Clock.Now())
	if !changed {
		return false, nil
	}
	updated, err := r.writeStatus(ctx, job, status)
	if err != nil {
		return false, fmt.Errorf("writing why the Job waits (%s): %w", w.Reason, err)
	}
	r.refusals.followOwnWrite(job, updated.ResourceVersion)
	job.Status, job.ResourceVersion = updated.Status, updated.ResourceVersion
	return true, nil
}

// Reasons of jobferry_jobs_waiting: why an unfinished manager Job does not
// run, read back from the reason of the condition jobferry wrote on it
// (JobWaiting).
const (
	waitingUserSuspended   = "user_suspended"
	waitingNotAllowed      = "not_allowed"
	waitingNoWorkerFits    = "no_worker_fits"
	waitingInvalidSelector = "invalid_selector"
	// waitingPlacementRefused: the manager's API server refused the write
	// that records the placement.
	waitingPlacementRefused = "placement_refused"
	// waitingWorkerLost: placed on a worker that is not connected now.
	waitingWorkerLost = "worker_lost"
	// waitingMirrorRefused: the worker refused the mirror (or its
	// namespace), or the mirror cannot be built.
	waitingMirrorRefused = "mirror_refused"
	// waitingQueued: queued in Kueue, not admitted yet.
	waitingQueued = "queued"
	// waitingNoWorkerCanRun: no worker could ever run it (Rejected).
	waitingNoWorkerCanRun = "no_worker_can_run"
	// waitingPodsNotAdmitted: its namespace refuses its pods.
	waitingPodsNotAdmitted = "pods_not_admitted"
	// waitingQuotaExceeded: its namespace's quota is full.
	waitingQuotaExceeded = "quota_exceeded"
)

var waitingReasons = []string{waitingUserSuspended, waitingNotAllowed, waitingNoWorkerFits, waitingInvalidSelector,
	waitingPlacementRefused, waitingWorkerLost, waitingMirrorRefused, waitingQueued, waitingNoWorkerCanRun,
	waitingPodsNotAdmitted, waitingQuotaExceeded}

// WaitingReasons are the reason label values of jobferry_jobs_waiting, one
// series each (a copy).
func WaitingReasons() []string { return slices.Clone(waitingReasons) }

// waitingByReason maps the reasons of the Suspended condition to the
// metric's.
var waitingByReason = map[string]string{
	reasonJobSuspended:           waitingUserSuspended,
	ReasonNotAllowed:             waitingNotAllowed,
	ReasonNoWorkerFits:           waitingNoWorkerFits,
	ReasonInvalidClusterSelector: waitingInvalidSelector,
	ReasonWaitingForWorker:       waitingPlacementRefused,
	ReasonWorkerNotConnected:     waitingWorkerLost,
	ReasonWaitingForMirror:       waitingMirrorRefused,
	ReasonQueued:                 waitingQueued,
	ReasonQueueLabelRemoved:      waitingQueued,
	ReasonNoWorkerCanRun:         waitingNoWorkerCanRun,
	ReasonPodsNotAdmitted:        waitingPodsNotAdmitted,
	ReasonQuotaExceeded:          waitingQuotaExceeded,
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
		return waitingWorkerLost
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return waitingByReason[c.Reason]
		}
	}
	return ""
}
