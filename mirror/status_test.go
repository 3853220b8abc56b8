package mirror

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func at(seconds int) *metav1.Time {
	t := metav1.NewTime(t0.Add(time.Duration(seconds) * time.Second))
	return &t
}

func cond(t batchv1.JobConditionType, reason string, seconds int) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: reason + " message", LastTransitionTime: *at(seconds), LastProbeTime: *at(seconds)}
}

func falseCond(t batchv1.JobConditionType, reason string, seconds int) batchv1.JobCondition {
	c := cond(t, reason, seconds)
	c.Status = corev1.ConditionFalse
	return c
}

func managerJob(status batchv1.JobStatus, mods ...func(*batchv1.JobSpec)) *batchv1.Job {
	j := &batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2)}, Status: status}
	for _, m := range mods {
		m(&j.Spec)
	}
	return j
}

func suspended(s *batchv1.JobSpec) { s.Suspend = ptr.To(true) }
func indexed(s *batchv1.JobSpec)   { s.CompletionMode = ptr.To(batchv1.IndexedCompletion) }
func perIndex(s *batchv1.JobSpec)  { indexed(s); s.BackoffLimitPerIndex = ptr.To[int32](1) }

func completionsAndParallelism(n int32) func(*batchv1.JobSpec) {
	return func(s *batchv1.JobSpec) { s.Completions, s.Parallelism = ptr.To(n), ptr.To(n) }
}

func TestStatus(t *testing.T) {
	running := batchv1.JobStatus{StartTime: at(0), Active: 2, Ready: ptr.To[int32](2), Terminating: ptr.To[int32](0), UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}}
	cases := map[string]struct {
		manager *batchv1.Job
		worker  batchv1.JobStatus
		want    batchv1.JobStatus
	}{
		"a running worker status is copied as is": {
			manager: managerJob(batchv1.JobStatus{}),
			worker:  running,
			want:    running,
		},
		"a complete worker status with its companion is copied as is": {
			manager: managerJob(running),
			worker: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(9), Succeeded: 2, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
				UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
				Conditions:              []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 9), cond(batchv1.JobComplete, "CompletionsReached", 9)}},
			want: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(9), Succeeded: 2, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
				UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
				Conditions:              []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 9), cond(batchv1.JobComplete, "CompletionsReached", 9)}},
		},
		"rules 8 and 11: a finished manager Job is frozen": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), CompletionTime: at(9), Succeeded: 2,
				Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 9), cond(batchv1.JobComplete, "CompletionsReached", 9)}}),
			worker: running,
			want: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(9), Succeeded: 2,
				Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 9), cond(batchv1.JobComplete, "CompletionsReached", 9)}},
		},
		"rules 9 and 10: counters never decrease": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Succeeded: 1, Failed: 3}),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, Failed: 1},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 1, Failed: 3},
		},
		"rule 10: an elastic Indexed Job scaled down drops the indexes beyond its completions": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 5, CompletedIndexes: "0-4"}, indexed, completionsAndParallelism(3)),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 3, CompletedIndexes: "0-2"},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 3, CompletedIndexes: "0-2"},
		},
		"rule 10: an elastic Indexed Job never loses the indexes it still needs (a new attempt starts at 0)": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Succeeded: 2, CompletedIndexes: "0,1"}, indexed, completionsAndParallelism(3)),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 3},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 3, Succeeded: 2},
		},
		"rule 10: an Indexed Job that is not elastic never decreases": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Succeeded: 2, CompletedIndexes: "0,1"}, indexed),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 1, CompletedIndexes: "0"},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1, Succeeded: 2, CompletedIndexes: "0"},
		},
		"rule 24: indexes beyond the manager's completions are not copied while the mirror lags a scale-down": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Active: 3, Succeeded: 2, CompletedIndexes: "0,1"}, perIndex, completionsAndParallelism(3)),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 3, Succeeded: 4, CompletedIndexes: "0,1,4", FailedIndexes: ptr.To("2,3")},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 3, Succeeded: 4, CompletedIndexes: "0,1", FailedIndexes: ptr.To("2")},
		},
		"index lists within completions are copied exactly as written": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Active: 2}, indexed, completionsAndParallelism(8)),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 2, Succeeded: 3, CompletedIndexes: "1,2,3"},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 2, Succeeded: 3, CompletedIndexes: "1,2,3"},
		},
		"rule 12: Failed without FailureTarget gets its companion in the same write": {
			manager: managerJob(running),
			worker:  batchv1.JobStatus{StartTime: at(0), Failed: 7, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, "BackoffLimitExceeded", 5)}},
			want: batchv1.JobStatus{StartTime: at(0), Failed: 7, Conditions: []batchv1.JobCondition{
				cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", 5), cond(batchv1.JobFailed, "BackoffLimitExceeded", 5)}},
		},
		"rule 13 and 14b: Complete without SuccessCriteriaMet or completionTime gets both": {
			manager: managerJob(running),
			worker:  batchv1.JobStatus{StartTime: at(0), Succeeded: 2, Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, "CompletionsReached", 8)}},
			want: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(8), Succeeded: 2, Conditions: []batchv1.JobCondition{
				cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 8), cond(batchv1.JobComplete, "CompletionsReached", 8)}},
		},
		"rule 12: a False FailureTarget is made True next to Failed": {
			manager: managerJob(running),
			worker: batchv1.JobStatus{StartTime: at(0), Failed: 2, Conditions: []batchv1.JobCondition{
				falseCond(batchv1.JobFailureTarget, "Old", 1), cond(batchv1.JobFailed, "DeadlineExceeded", 5)}},
			want: batchv1.JobStatus{StartTime: at(0), Failed: 2, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "DeadlineExceeded message", LastTransitionTime: *at(1), LastProbeTime: *at(1)},
				cond(batchv1.JobFailed, "DeadlineExceeded", 5)}},
		},
		"rules 6 and 4: SuccessCriteriaMet stays and a contradicting failure is not copied": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Succeeded: 2, Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 4)}}),
			worker:  batchv1.JobStatus{StartTime: at(0), Failed: 1, Active: 1, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", 6)}},
			want:    batchv1.JobStatus{StartTime: at(0), Succeeded: 2, Failed: 1, Active: 1, Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 4)}},
		},
		"rules 8 and 17: FailureTarget stays and a contradicting success is not copied": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Failed: 2, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", 4)}}),
			worker: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(9), Succeeded: 2, Conditions: []batchv1.JobCondition{
				cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 9), cond(batchv1.JobComplete, "CompletionsReached", 9)}},
			want: batchv1.JobStatus{StartTime: at(0), Succeeded: 2, Failed: 2, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", 4)}},
		},
		"rule 23: startTime does not move while the manager Job runs": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Active: 2}),
			worker:  batchv1.JobStatus{StartTime: at(30), Active: 2},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 2},
		},
		"rule 23: startTime moves while the manager Job is suspended": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0)}, suspended),
			worker:  batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended", 3)}},
			want:    batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended", 3)}},
		},
		"rule 23: startTime moves in the write that resumes": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0), Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended", 3)}}),
			worker:  batchv1.JobStatus{StartTime: at(20), Active: 2, Conditions: []batchv1.JobCondition{falseCond(batchv1.JobSuspended, "JobResumed", 20)}},
			want:    batchv1.JobStatus{StartTime: at(20), Active: 2, Conditions: []batchv1.JobCondition{falseCond(batchv1.JobSuspended, "JobResumed", 20)}},
		},
		"rule 15: completionTime is not before the manager's startTime": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(10), Active: 1}),
			worker: batchv1.JobStatus{StartTime: at(0), CompletionTime: at(5), Succeeded: 2, Conditions: []batchv1.JobCondition{
				cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 5), cond(batchv1.JobComplete, "CompletionsReached", 5)}},
			want: batchv1.JobStatus{StartTime: at(10), CompletionTime: at(10), Succeeded: 2, Conditions: []batchv1.JobCondition{
				cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 5), cond(batchv1.JobComplete, "CompletionsReached", 5)}},
		},
		"rules 18, 19, 20, 21: a finished status has no active, terminating or uncounted pods, and a startTime": {
			manager: managerJob(batchv1.JobStatus{}),
			worker: batchv1.JobStatus{Active: 1, Terminating: ptr.To[int32](1), Ready: ptr.To[int32](1), Failed: 1,
				UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Failed: []types.UID{"p1"}},
				Conditions:              []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "DeadlineExceeded", 4), cond(batchv1.JobFailed, "DeadlineExceeded", 6)}},
			want: batchv1.JobStatus{StartTime: at(4), Terminating: ptr.To[int32](0), Ready: ptr.To[int32](0), Failed: 1,
				UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
				Conditions:              []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "DeadlineExceeded", 4), cond(batchv1.JobFailed, "DeadlineExceeded", 6)}},
		},
		"rule 20 exemption: a suspended Job with zero completions finishes without a startTime": {
			manager: managerJob(batchv1.JobStatus{}, suspended, func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](0) }),
			worker:  batchv1.JobStatus{CompletionTime: at(1), Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 1), cond(batchv1.JobComplete, "CompletionsReached", 1)}},
			want:    batchv1.JobStatus{CompletionTime: at(1), Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", 1), cond(batchv1.JobComplete, "CompletionsReached", 1)}},
		},
		"rule 14a: no completionTime without Complete": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0)}),
			worker:  batchv1.JobStatus{StartTime: at(0), CompletionTime: at(3), Active: 1},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1},
		},
		"rule 22: ready never exceeds active": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0)}),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, Ready: ptr.To[int32](2)},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1, Ready: ptr.To[int32](1)},
		},
		"rules 24 and 26: indexes are copied for an Indexed Job with backoffLimitPerIndex": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0)}, perIndex),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, CompletedIndexes: "0", FailedIndexes: ptr.To("1")},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1, CompletedIndexes: "0", FailedIndexes: ptr.To("1")},
		},
		"rules 25 and 26: indexes the manager's spec does not allow are dropped": {
			manager: managerJob(batchv1.JobStatus{StartTime: at(0)}),
			worker:  batchv1.JobStatus{StartTime: at(0), Active: 1, CompletedIndexes: "0", FailedIndexes: ptr.To("")},
			want:    batchv1.JobStatus{StartTime: at(0), Active: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.manager.DeepCopy()
			workerBefore := tc.worker.DeepCopy()
			got := Status(tc.manager, tc.worker)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.manager); diff != "" {
				t.Errorf("manager Job modified:\n%s", diff)
			}
			if diff := cmp.Diff(*workerBefore, tc.worker); diff != "" {
				t.Errorf("worker status modified:\n%s", diff)
			}
		})
	}
}

func TestRejectedFields(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j", field.ErrorList{
		field.Invalid(field.NewPath("status", "conditions"), nil, "cannot add Complete without SuccessCriteriaMet"),
		field.Invalid(field.NewPath("status", "uncountedTerminatedPods", "failed").Index(3), "", "must not be empty"),
		field.Invalid(field.NewPath("status", "conditions"), nil, "again"),
	})
	if diff := cmp.Diff([]string{"status.conditions", "status.uncountedTerminatedPods.failed"}, RejectedFields(err)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if got := RejectedFields(apierrors.NewConflict(schema.GroupResource{}, "j", nil)); got != nil {
		t.Errorf("a conflict is not a rejection, got %v", got)
	}
}
