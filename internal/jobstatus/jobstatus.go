// Package jobstatus reads a batch/v1 Job status: whether it is finished, its
// True conditions, and the phase jobferry reports it in. Upstream's Job
// controller keeps the same predicates together (pkg/controller/job/util);
// the manager, the worker's Job controller, the plugin and the dev tool
// share these.
package jobstatus

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Finished reports whether a Job status is terminal (Complete or Failed).
func Finished(s batchv1.JobStatus) bool {
	return ConditionTrue(s, batchv1.JobComplete) || ConditionTrue(s, batchv1.JobFailed)
}

// ConditionTrue reports whether the status has condition t with status True.
func ConditionTrue(s batchv1.JobStatus, t batchv1.JobConditionType) bool {
	return Condition(s, t) != nil
}

// Condition is the status's condition of type t when it is True, else nil.
func Condition(s batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t && s.Conditions[i].Status == corev1.ConditionTrue {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Phases of a Job as jobferry reports them (the jobferry_jobs metric,
// `kubectl jobferry status`).
const (
	PhasePending   = "Pending"
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
)

// Phase is a Job status's phase: Succeeded or Failed once terminal, Running
// while a pod is active, else Pending.
func Phase(s batchv1.JobStatus) string {
	switch {
	case ConditionTrue(s, batchv1.JobComplete):
		return PhaseSucceeded
	case ConditionTrue(s, batchv1.JobFailed):
		return PhaseFailed
	case s.Active > 0:
		return PhaseRunning
	default:
		return PhasePending
	}
}
