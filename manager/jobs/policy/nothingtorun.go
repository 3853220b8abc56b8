package policy

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NothingToRun: a Job with completions 0 is complete before it starts.
// Upstream's sync checks succeeded >= completions before anything else, so
// such a Job completes at once, suspended or not; jobferry completes it on
// the manager without placing it (there is nothing a worker could run).
func NothingToRun(job *batchv1.Job) bool {
	return job.Spec.Completions != nil && *job.Spec.Completions == 0
}

// CompletedWithoutPods is the status kube-controller-manager writes on a Job
// with nothing to run, in one write: SuccessCriteriaMet and Complete
// (CompletionsReached), the completion time, and a startTime unless the Job
// is suspended (the API server exempts exactly that case from "a finished Job
// has a startTime").
func CompletedWithoutPods(job *batchv1.Job, now time.Time) batchv1.JobStatus {
	out := *job.Status.DeepCopy()
	at := metav1.NewTime(now)
	if out.StartTime == nil && !ptr.Deref(job.Spec.Suspend, false) {
		out.StartTime = &at
	}
	out.Active = 0
	out.Ready = ptr.To[int32](0)
	out.Terminating = ptr.To[int32](0)
	out.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	reached := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached,
			Message: "Reached expected number of succeeded pods", LastProbeTime: at, LastTransitionTime: at}
	}
	// A Suspended condition jobferry wrote while the Job waited goes: upstream
	// never writes one on a Job it completes at once.
	var conditions []batchv1.JobCondition
	for _, c := range out.Conditions {
		if c.Type != batchv1.JobSuspended {
			conditions = append(conditions, c)
		}
	}
	out.Conditions = append(conditions, reached(batchv1.JobSuccessCriteriaMet), reached(batchv1.JobComplete))
	out.CompletionTime = &at
	return out
}
