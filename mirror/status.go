package mirror

import (
	"errors"
	"math"
	"regexp"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobindex"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// Status returns the status the manager Job should have to reflect its
// mirror's status on the worker. It copies the worker status and changes only
// what the API server's Job status validation would reject on the manager
// (rule numbers refer to the checklist in
// shared/research/upstream-job-controller-and-status-validation.md §4b):
//   - a finished manager Job is frozen (rules 8, 11);
//   - succeeded and failed never decrease (9, 10), as after a re-dispatch,
//     except that scaling an elastic Indexed Job down drops the indexes at or
//     beyond its new completions, as the worker's own controller does;
//   - completedIndexes and failedIndexes name no index at or beyond the
//     manager Job's completions (24), even while the mirror still has the
//     completions of before a scale-down;
//   - FailureTarget and SuccessCriteriaMet, once True on the manager, stay (6, 8),
//     and conditions contradicting them are not copied (3, 4, 16, 17);
//   - Failed comes with FailureTarget, Complete with SuccessCriteriaMet, in the
//     same write, synthesised if the worker lacks them (12, 13);
//   - startTime changes only while suspended or in the write that resumes (23);
//   - a finished status has a startTime, no active, terminating or uncounted
//     pods, and Complete a completionTime not before startTime (14, 15, 18-21);
//   - ready never exceeds active (22); failedIndexes only with
//     backoffLimitPerIndex and completedIndexes only for Indexed Jobs (25, 26).
func Status(manager *batchv1.Job, worker batchv1.JobStatus) batchv1.JobStatus {
	old := manager.Status
	if jobstatus.Finished(old) {
		return *old.DeepCopy()
	}
	out := *worker.DeepCopy()

	out.Succeeded = max(out.Succeeded, succeededFloor(manager))
	out.Failed = max(out.Failed, old.Failed)
	if manager.Spec.BackoffLimitPerIndex == nil {
		out.FailedIndexes = nil
	}
	if !isIndexed(manager) {
		out.CompletedIndexes = ""
	}
	if completions := manager.Spec.Completions; completions != nil {
		out.CompletedIndexes = belowCompletions(out.CompletedIndexes, int(*completions))
		if out.FailedIndexes != nil {
			out.FailedIndexes = ptr.To(belowCompletions(*out.FailedIndexes, int(*completions)))
		}
	}

	if old.StartTime != nil && !old.StartTime.Equal(out.StartTime) && !startTimeMayChange(manager, out) {
		out.StartTime = old.StartTime.DeepCopy()
	}

	switch {
	case jobstatus.ConditionTrue(old, batchv1.JobFailureTarget):
		out.Conditions = withoutTypes(out.Conditions, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)
		out.Conditions = keep(out.Conditions, jobstatus.Condition(old, batchv1.JobFailureTarget))
	case jobstatus.ConditionTrue(old, batchv1.JobSuccessCriteriaMet):
		out.Conditions = withoutTypes(out.Conditions, batchv1.JobFailureTarget, batchv1.JobFailed)
		out.Conditions = keep(out.Conditions, jobstatus.Condition(old, batchv1.JobSuccessCriteriaMet))
	}
	out.Conditions = withCompanion(out.Conditions, batchv1.JobFailed, batchv1.JobFailureTarget)
	out.Conditions = withCompanion(out.Conditions, batchv1.JobComplete, batchv1.JobSuccessCriteriaMet)

	if jobstatus.Finished(out) {
		out.Active = 0
		if out.Terminating != nil {
			out.Terminating = ptr.To[int32](0)
		}
		if out.UncountedTerminatedPods != nil {
			out.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
		}
		if out.StartTime == nil && !(ptr.Deref(manager.Spec.Suspend, false) && ptr.Deref(manager.Spec.Completions, 1) == 0) {
			out.StartTime = earliestTransition(out.Conditions)
		}
		if c := jobstatus.Condition(out, batchv1.JobComplete); c != nil && out.CompletionTime == nil {
			out.CompletionTime = c.LastTransitionTime.DeepCopy()
		}
	}
	if !jobstatus.ConditionTrue(out, batchv1.JobComplete) {
		out.CompletionTime = nil
	}
	if out.CompletionTime != nil && out.StartTime != nil && out.CompletionTime.Before(out.StartTime) {
		out.CompletionTime = out.StartTime.DeepCopy()
	}
	if out.Ready != nil && *out.Ready > out.Active {
		out.Ready = ptr.To(out.Active)
	}
	return out
}

// succeededFloor is the lowest succeeded count the manager Job may show:
// what it shows now, less, for an elastic Indexed Job (completions ==
// parallelism, the one case where the API server lets succeeded decrease),
// the completed indexes its completions no longer include.
func succeededFloor(manager *batchv1.Job) int32 {
	old := manager.Status
	spec := manager.Spec
	if !isIndexed(manager) || spec.Completions == nil || !ptr.Equal(spec.Completions, spec.Parallelism) {
		return old.Succeeded
	}
	all := jobindex.Parse(old.CompletedIndexes, math.MaxInt32).Total()
	kept := jobindex.Parse(old.CompletedIndexes, int(*spec.Completions)).Total()
	return max(old.Succeeded-int32(all-kept), 0)
}

// belowCompletions drops the indexes at or beyond completions from an index
// list, leaving a list without such indexes exactly as it is.
func belowCompletions(indexes string, completions int) string {
	kept := jobindex.Parse(indexes, completions)
	if kept.Total() == jobindex.Parse(indexes, math.MaxInt32).Total() {
		return indexes
	}
	return kept.String()
}

func isIndexed(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
}

// startTimeMayChange: once set, startTime may change only while the Job is
// suspended, or in the write that flips Suspended from True to False.
func startTimeMayChange(manager *batchv1.Job, next batchv1.JobStatus) bool {
	if ptr.Deref(manager.Spec.Suspend, false) {
		return true
	}
	resumed := slices.ContainsFunc(next.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionFalse
	})
	return jobstatus.ConditionTrue(manager.Status, batchv1.JobSuspended) && resumed
}

func withoutTypes(conds []batchv1.JobCondition, types ...batchv1.JobConditionType) []batchv1.JobCondition {
	return slices.DeleteFunc(conds, func(c batchv1.JobCondition) bool { return slices.Contains(types, c.Type) })
}

// keep puts c back, replacing any condition of its type.
func keep(conds []batchv1.JobCondition, c *batchv1.JobCondition) []batchv1.JobCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = *c.DeepCopy()
			return conds
		}
	}
	return append(conds, *c.DeepCopy())
}

// withCompanion makes sure a True terminal condition is preceded by its True
// interim companion, which the API server requires in the same write.
func withCompanion(conds []batchv1.JobCondition, terminal, companion batchv1.JobConditionType) []batchv1.JobCondition {
	i := slices.IndexFunc(conds, func(c batchv1.JobCondition) bool { return c.Type == terminal && c.Status == corev1.ConditionTrue })
	if i < 0 {
		return conds
	}
	j := slices.IndexFunc(conds, func(c batchv1.JobCondition) bool { return c.Type == companion })
	if j >= 0 {
		if conds[j].Status != corev1.ConditionTrue {
			conds[j].Status = corev1.ConditionTrue
			conds[j].Reason, conds[j].Message = conds[i].Reason, conds[i].Message
		}
		return conds
	}
	c := conds[i]
	c.Type = companion
	return slices.Insert(conds, i, c)
}

func earliestTransition(conds []batchv1.JobCondition) *metav1.Time {
	var earliest *metav1.Time
	for i := range conds {
		t := conds[i].LastTransitionTime
		if earliest == nil || t.Before(earliest) {
			earliest = t.DeepCopy()
		}
	}
	return earliest
}

var listIndex = regexp.MustCompile(`\[[^]]*\]`)

// RejectedFields lists the fields an Invalid error from the API server names
// (status.conditions, status.startTime, ...), so a rejected status write can
// be counted per rule without unbounded label values.
func RejectedFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return nil
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return []string{"unknown"}
	}
	var fields []string
	for _, c := range details.Causes {
		field := listIndex.ReplaceAllString(c.Field, "")
		if !slices.Contains(fields, field) {
			fields = append(fields, field)
		}
	}
	return fields
}
