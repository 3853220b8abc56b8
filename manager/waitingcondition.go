package manager

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
)

// Reasons of the Suspended condition jobferry writes on a manager Job that
// has no mirror whose status could be copied, so that `kubectl get job` shows
// it Suspended, not Running, and `kubectl describe job` says why it waits.
// The mirror's status replaces the condition once the Job runs on a worker.
const (
	// ReasonWaitingForWorker: no worker is chosen yet (none fits, the Job's
	// cluster selector is invalid, or the placement could not be recorded).
	ReasonWaitingForWorker = "WaitingForWorker"
	// ReasonWaitingForMirror: a worker is chosen, but the mirror is not
	// created yet (the worker is unreachable, or refused the mirror).
	ReasonWaitingForMirror = "WaitingForMirror"
	// reasonJobSuspended is what kube-controller-manager writes on a Job its
	// user suspended; jobferry writes the same on one it never dispatched.
	reasonJobSuspended = "JobSuspended"
)

// workerNotConnected is how a Waiting message says the worker is down.
const workerNotConnected = "the worker cluster is not connected"

// waiting says why a manager Job without a mirror does not run.
type waiting struct {
	reason, message string
}

func userSuspendedWaiting() waiting { return waiting{reasonJobSuspended, "Job suspended"} }

func waitingForWorker(format string, args ...any) waiting {
	return waiting{ReasonWaitingForWorker, "waiting to be dispatched to a worker cluster: " + fmt.Sprintf(format, args...)}
}

func waitingForMirror(worker, format string, args ...any) waiting {
	return waiting{ReasonWaitingForMirror, fmt.Sprintf("placed on worker cluster %s; ", worker) + fmt.Sprintf(format, args...)}
}

// pendingStatus returns status with a True Suspended condition saying why the
// Job waits, and whether that is worth a write: a new reason or message is
// (the messages carry no figures that change by themselves: "no worker fits"
// says which resource is short, the Event how much). Nothing else of
// the status changes, so every Job status validation rule that held still
// holds (Suspended is not among the conditions the API server guards).
func pendingStatus(status batchv1.JobStatus, w waiting, now time.Time) (batchv1.JobStatus, bool) {
	out := *status.DeepCopy()
	for i := range out.Conditions {
		c := &out.Conditions[i]
		if c.Type != batchv1.JobSuspended {
			continue
		}
		switch {
		case c.Status == corev1.ConditionTrue && c.Reason == w.reason && c.Message == w.message:
			return status, false
		case c.Status != corev1.ConditionTrue:
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime = corev1.ConditionTrue, w.reason, w.message, metav1.NewTime(now)
		return out, true
	}
	out.Conditions = append(out.Conditions, batchv1.JobCondition{
		Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: w.reason, Message: w.message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
	return out, true
}

// showWaiting writes why the Job waits onto its status, unless it is finished
// or already says so. The Job object is updated with what was written.
func (r *JobReconciler) showWaiting(ctx context.Context, job *batchv1.Job, w waiting) error {
	_, err := r.updateWaiting(ctx, job, w)
	return err
}

// updateWaiting is showWaiting, reporting whether it wrote.
func (r *JobReconciler) updateWaiting(ctx context.Context, job *batchv1.Job, w waiting) (bool, error) {
	if isFinished(job) {
		return false, nil
	}
	status, changed := pendingStatus(job.Status, w, r.Clock.Now())
	if !changed {
		return false, nil
	}
	updated := job.DeepCopy()
	updated.Status = status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return false, fmt.Errorf("writing why the Job waits (%s): %w", w.reason, err)
	}
	r.refusals.followOwnWrite(job, updated.ResourceVersion)
	job.Status, job.ResourceVersion = updated.Status, updated.ResourceVersion
	return true, nil
}

// Reasons of jobferry_jobs_waiting: why an unfinished manager Job does not
// run, read back from what jobferry wrote on it (jobWaiting).
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
)

var waitingReasons = []string{waitingUserSuspended, waitingNotAllowed, waitingNoWorkerFits, waitingInvalidSelector,
	waitingPlacementRefused, waitingWorkerLost, waitingMirrorRefused}

// jobWaiting says why an unfinished manager Job does not run ("" when it
// runs, or is finished): its worker is lost (workerDown), or the Suspended
// condition jobferry (or the worker, for a suspended mirror) wrote says why.
func jobWaiting(job *batchv1.Job, workerDown bool) string {
	if isFinished(job) {
		return ""
	}
	if workerDown {
		return waitingWorkerLost
	}
	for _, c := range job.Status.Conditions {
		if c.Type != batchv1.JobSuspended || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case reasonJobSuspended:
			return waitingUserSuspended
		case ReasonNotAllowed:
			return waitingNotAllowed
		case ReasonWaitingForMirror:
			if strings.Contains(c.Message, workerNotConnected) {
				return waitingWorkerLost
			}
			return waitingMirrorRefused
		case ReasonWaitingForWorker:
			switch {
			case strings.Contains(c.Message, dispatch.NoWorkerFits):
				return waitingNoWorkerFits
			case strings.Contains(c.Message, v1alpha1.ClusterSelectorAnnotation):
				return waitingInvalidSelector
			}
			return waitingPlacementRefused
		}
	}
	return ""
}
