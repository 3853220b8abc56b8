package cachebudget

import batchv1 "k8s.io/api/batch/v1"

// JobStatusOver says why a Job status holds more than JobStatus (nil: it
// does not): what the manager's cache keeps of a manager Job's status, so
// the most the manager copies onto one.
func JobStatusOver(status *batchv1.JobStatus) *Over {
	meter := NewMeter(JobStatus)
	entries, bytes := Measure(status)
	meter.Add("status", entries, bytes)
	return meter.Over()
}
