package policy

import (
	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobferry/jobferry/internal/jobstatus"
)

func IsFinished(job *batchv1.Job) bool { return jobstatus.Finished(job.Status) }
