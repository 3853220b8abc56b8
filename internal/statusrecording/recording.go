// Package statusrecording is the format of the Job statuses a real Job
// controller wrote, as hack/record-status captures them (testdata of package
// mirror) for the tests that replay them through the status copy. Tests and
// that tool only: no product binary links it.
package statusrecording

import batchv1 "k8s.io/api/batch/v1"

// Recording is a Job spec and the statuses a real Job controller wrote for
// it.
type Recording struct {
	Spec  batchv1.JobSpec `json:"spec"`
	Steps []RecordedStep  `json:"steps"`
}

// RecordedStep is one status with the spec.suspend in force when written.
type RecordedStep struct {
	Suspend bool              `json:"suspend"`
	Status  batchv1.JobStatus `json:"status"`
}
