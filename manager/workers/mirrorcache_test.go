package workers

import (
	"strings"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	slim := SlimMirror(job)
	if len(slim.Spec.Template.Spec.Containers) != 0 || slim.Labels["team"] != "" || slim.Spec.Template.Annotations != nil {
		t.Errorf("kept what the manager does not read: containers %d, labels %v, template annotations of %d keys",
			len(slim.Spec.Template.Spec.Containers), slim.Labels, len(slim.Spec.Template.Annotations))
	}
	if slim.UID != job.UID || slim.Labels[v1alpha1.OriginUIDLabel] != job.Labels[v1alpha1.OriginUIDLabel] || slim.Status.Active != 1 ||
		*slim.Spec.Parallelism != *job.Spec.Parallelism || slim.Spec.Template.Spec.NodeSelector["pool"] != "general" {
		t.Errorf("lost what the manager reads: %+v", slim)
	}
}

// What the cache keeps comes back as it was, in a Job of the caller's own;
// a cachedMirror costs well under a batchv1.Job (the reason it exists).
func TestCachedMirrorGivesBackWhatItKeeps(t *testing.T) {
	deleted := metav1.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "worker-uid-1", ResourceVersion: "7", Generation: 2,
			DeletionTimestamp: &deleted, Labels: map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.DispatchAttemptLabel: "2"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](4), ActiveDeadlineSeconds: ptr.To[int64](60),
			BackoffLimit: ptr.To[int32](1), Suspend: ptr.To(false), CompletionMode: ptr.To(batchv1.IndexedCompletion), ManagedBy: ptr.To("x"),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train",
					// What the worker's API server derives from the mirror's
					// UID and name: left out.
					"batch.kubernetes.io/controller-uid": "worker-uid-1", "controller-uid": "worker-uid-1",
					"batch.kubernetes.io/job-name": "train", "job-name": "train"},
					Annotations: map[string]string{"note": "n"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu"}, Tolerations: []corev1.Toleration{{Key: "gpu"}},
					SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}},
					Affinity:        &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}, PodAffinity: &corev1.PodAffinity{}}}}},
		Status: batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}}},
	}
	want := job.DeepCopy()
	want.TypeMeta = jobKind
	want.Spec.Template.Spec.Affinity.PodAffinity = nil
	want.Spec.Template.Labels = map[string]string{"app": "train"}
	got := SlimMirror(job)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the cached mirror gives back\n%+v\nwant\n%+v", got, want)
	}
	m, _ := newCachedMirror(job)
	own := m.job()
	own.Labels["x"], own.Spec.Template.Spec.NodeSelector["pool"], *own.Spec.Parallelism = "y", "cpu", 9
	if again := m.job(); again.Labels["x"] != "" || again.Spec.Template.Spec.NodeSelector["pool"] != "gpu" || *again.Spec.Parallelism != 2 {
		t.Errorf("a change to one job() reached the cache: %+v", again)
	}
	if size, jobSize := unsafe.Sizeof(cachedMirror{}), unsafe.Sizeof(batchv1.Job{}); size > jobSize/2 {
		t.Errorf("a cachedMirror takes %d bytes, a batchv1.Job %d: the cache would save little", size, jobSize)
	}
}
