package workers

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A Job with jobferry's labels costs the manager what it reads of it, not
// what its author put in it.
func TestSlimMirror(t *testing.T) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "worker-uid-1",
			Labels: map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "uid-1"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "work", Image: "example/work:1"}}}}},
		Status: batchv1.JobStatus{Active: 1},
	}
	job.Labels["team"] = strings.Repeat("x", 63)
	job.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PAYLOAD", Value: strings.Repeat("p", 1<<20)}}
	job.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "general"}
	job.Spec.Template.Annotations = map[string]string{"big": strings.Repeat("a", maxCachedTemplateMetadata)}
	obj, err := SlimMirror(job)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*batchv1.Job)
	if len(slim.Spec.Template.Spec.Containers) != 0 || slim.Labels["team"] != "" || slim.Spec.Template.Annotations != nil {
		t.Errorf("kept what the manager does not read: containers %d, labels %v, template annotations of %d keys",
			len(slim.Spec.Template.Spec.Containers), slim.Labels, len(slim.Spec.Template.Annotations))
	}
	if slim.UID != job.UID || slim.Labels[v1alpha1.OriginUIDLabel] != job.Labels[v1alpha1.OriginUIDLabel] || slim.Status.Active != 1 ||
		*slim.Spec.Parallelism != *job.Spec.Parallelism || slim.Spec.Template.Spec.NodeSelector["pool"] != "general" {
		t.Errorf("lost what the manager reads: %+v", slim)
	}
}
