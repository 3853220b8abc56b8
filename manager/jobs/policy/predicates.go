package policy

import (
	"github.com/jobferry/jobferry/internal/jobstatus"
	batchv1 "k8s.io/api/batch/v1"
)

func IsFinished(job *batchv1.Job) bool { return jobstatus.Finished(job.Status) }
