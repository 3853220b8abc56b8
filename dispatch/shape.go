package dispatch

import (
	"crypto/sha256"
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Shape is what Place and Admits read of a Job, hashed: two Jobs of one
// shape are placed alike against the same workers, so the manager's waiting
// room keeps one queue per shape and asks Place once for its head. It lives
// beside Place so that a rule reading something new of the Job is seen to
// need it here too (TestShapeCoversWhatPlaceReads).
func Shape(job *batchv1.Job) string {
	spec := job.Spec.Template.Spec
	raw, err := json.Marshal(struct {
		Namespace, Selector string
		Excluded            []string
		Request             corev1.ResourceList
		NodeSelector        map[string]string
		Affinity            *corev1.Affinity
		Tolerations         []corev1.Toleration
		Features            []string
	}{
		job.Namespace, job.Annotations[v1alpha1.ClusterSelectorAnnotation], ExcludedWorkers(job),
		JobRequest(job), spec.NodeSelector, spec.Affinity, spec.Tolerations, UsedFeatures(job),
	})
	if err != nil {
		// These types always marshal; a Job that did not would get a
		// shape of its own.
		return "job/" + job.Namespace + "/" + job.Name
	}
	sum := sha256.Sum256(raw)
	return string(sum[:])
}
