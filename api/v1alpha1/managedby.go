package v1alpha1

import batchv1 "k8s.io/api/batch/v1"

// IsManagerJob reports whether a Job names jobferry's manager in
// spec.managedBy (ManagerManagedBy): a Job jobferry dispatches.
func IsManagerJob(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy == ManagerManagedBy
}
