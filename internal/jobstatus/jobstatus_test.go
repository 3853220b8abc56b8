package jobstatus

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestPhase(t *testing.T) {
	cond := func(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: s}
	}
	cases := []struct {
		name     string
		status   batchv1.JobStatus
		phase    string
		finished bool
	}{
		{"new", batchv1.JobStatus{}, PhasePending, false},
		{"a pod active", batchv1.JobStatus{Active: 1}, PhaseRunning, false},
		{"complete", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue)}}, PhaseSucceeded, true},
		{"failed with a pod still active", batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue)}}, PhaseFailed, true},
		{"a False terminal condition is not terminal", batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionFalse)}}, PhaseRunning, false},
		{"failing, not failed yet", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}}, PhasePending, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Phase(tc.status); got != tc.phase {
				t.Errorf("Phase = %s, want %s", got, tc.phase)
			}
			if got := Finished(tc.status); got != tc.finished {
				t.Errorf("Finished = %t, want %t", got, tc.finished)
			}
		})
	}
}
