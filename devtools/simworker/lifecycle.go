// Package simworker simulates worker clusters for the bench's scale runs
// (`make bench BENCH_SIM=1`): each is a real API server without nodes or
// pods (localcluster.Spec.APIServerOnly), on which the simulator moves every
// Job through the statuses kube-controller-manager writes for a Job whose
// pods run for their run time — started, then complete (or failed) — and
// publishes the cluster's ClusterCapacity from the Jobs running there, as
// the worker binary would from its nodes and pods. The manager under test
// sees real API servers, real watches and real status validation; only the
// pods are missing. Results from such workers measure the manager, and are
// labelled simulated.
package simworker

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobstatus"
)

// Annotations and labels of a Job's pod template the simulator honours,
// KWOK's own: how long its pods run, and that they fail.
const (
	RunForAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"
	FailLabel        = "pod-container-running-failed.stage.kwok.x-k8s.io"
)

// Timing says how long a simulated Job takes.
type Timing struct {
	// Start is from the Job's creation (or resumption) to its pods
	// running and ready.
	Start time.Duration
	// RunFor is how long its pods run when the template does not say
	// (RunForAnnotation).
	RunFor time.Duration
	// Hold keeps running Jobs running until they are released
	// (Options.Release): the bench's runs that track many Jobs at once.
	Hold bool
}

// transition is the status a Job moves to next, and when.
type transition struct {
	at     time.Time
	status batchv1.JobStatus
}

// next is the Job's next status and when it is due, or false when nothing
// is left to do (finished, or suspended and stopped). Each status passes the
// API server's Job status validation from the one before (the checklist of
// shared/research §4b): pods start with a startTime; a suspended Job stops
// with its Suspended condition and no startTime, a resumed one starts again;
// success is SuccessCriteriaMet and Complete with a completionTime in one
// write, failure FailureTarget and Failed, with no pod active.
func next(job *batchv1.Job, t Timing) (transition, bool) {
	st := job.Status
	if jobstatus.Finished(st) {
		return transition{}, false
	}
	pods := ptr.Deref(job.Spec.Parallelism, 1)
	completions := ptr.Deref(job.Spec.Completions, pods)
	suspended := ptr.Deref(job.Spec.Suspend, false)
	switch {
	case suspended && (st.StartTime != nil || st.Active > 0 || !condition(st, batchv1.JobSuspended)):
		out := *st.DeepCopy()
		out.Active, out.Ready, out.StartTime = 0, ptr.To[int32](0), nil
		out.Conditions = withCondition(out.Conditions, batchv1.JobSuspended, "JobSuspended", "Job suspended", job.CreationTimestamp.Time)
		return transition{at: time.Time{}, status: out}, true
	case suspended:
		return transition{}, false
	case st.StartTime == nil:
		// Started Start after its creation or its resumption.
		from := job.CreationTimestamp.Time
		if c := conditionOf(st, batchv1.JobSuspended); c != nil {
			from = c.LastTransitionTime.Time
		}
		at := from.Add(t.Start)
		out := *st.DeepCopy()
		out.StartTime = ptr.To(metav1.NewTime(at))
		out.Active, out.Ready, out.Terminating = pods, ptr.To(pods), ptr.To[int32](0)
		out.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
		if c := conditionOf(out, batchv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
			// Resumed: the same write flips Suspended, as upstream's does.
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, "JobResumed", "Job resumed"
			c.LastProbeTime, c.LastTransitionTime = metav1.NewTime(at), metav1.NewTime(at)
		}
		return transition{at: at, status: out}, true
	}
	if t.Hold {
		return transition{}, false
	}
	at := st.StartTime.Add(runFor(job, t))
	out := *st.DeepCopy()
	out.Active, out.Ready, out.Terminating = 0, ptr.To[int32](0), ptr.To[int32](0)
	out.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	if job.Spec.Template.Labels[FailLabel] == "true" {
		out.Failed += pods
		out.Conditions = withCondition(out.Conditions, batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit", at)
		out.Conditions = withCondition(out.Conditions, batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit", at)
		return transition{at: at, status: out}, true
	}
	out.Succeeded = completions
	out.Conditions = withCondition(out.Conditions, batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", at)
	out.Conditions = withCondition(out.Conditions, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", at)
	out.CompletionTime = ptr.To(metav1.NewTime(at))
	return transition{at: at, status: out}, true
}

// runFor is how long the Job's pods run.
func runFor(job *batchv1.Job, t Timing) time.Duration {
	if d, err := time.ParseDuration(job.Spec.Template.Annotations[RunForAnnotation]); err == nil && d >= 0 {
		return d
	}
	return t.RunFor
}

// running: the Job's pods are running now (they hold their requests).
func running(job *batchv1.Job) bool {
	return job.Status.Active > 0 && !jobstatus.Finished(job.Status)
}

func condition(st batchv1.JobStatus, t batchv1.JobConditionType) bool {
	c := conditionOf(st, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

func conditionOf(st batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// withCondition sets the condition True (adding it when missing).
func withCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType, reason, message string, at time.Time) []batchv1.JobCondition {
	now := metav1.NewTime(at)
	for i := range conds {
		if conds[i].Type == t {
			if conds[i].Status != corev1.ConditionTrue {
				conds[i].LastTransitionTime = now
			}
			conds[i].Status, conds[i].Reason, conds[i].Message, conds[i].LastProbeTime = corev1.ConditionTrue, reason, message, now
			return conds
		}
	}
	return append(conds, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now})
}
