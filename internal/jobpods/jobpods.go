// Package jobpods builds a Job's pods as a Job controller creates them: the
// worker's own Job controller (worker/jobcontroller) creates them so, and
// the manager dry-runs one so in the Job's own namespace before its first
// mirror (manager/tenantlimits), so what the manager cluster's admission
// judges is what a Job controller would have it judge.
package jobpods

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NoIndex is the index of a NonIndexed Job's pod (New).
const NoIndex = -1

// IsIndexed says whether the Job's completion mode is Indexed.
func IsIndexed(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
}

// Template is the Job's pod template with the tracking finalizer and, for
// Indexed Jobs, the JOB_COMPLETION_INDEX variable in every container.
func Template(job *batchv1.Job) *corev1.PodTemplateSpec {
	t := job.Spec.Template.DeepCopy()
	if IsIndexed(job) {
		env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation),
		}}}
		addEnv := func(cs []corev1.Container) {
			for i := range cs {
				if !slices.ContainsFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == env.Name }) {
					cs[i].Env = append(cs[i].Env, env)
				}
			}
		}
		addEnv(t.Spec.InitContainers)
		addEnv(t.Spec.Containers)
	}
	if !slices.Contains(t.Finalizers, batchv1.JobTrackingFinalizer) {
		t.Finalizers = append(t.Finalizers, batchv1.JobTrackingFinalizer)
	}
	return t
}

// New builds one pod of the Job from its Template t; index is NoIndex for
// NonIndexed Jobs.
func New(job *batchv1.Job, t *corev1.PodTemplateSpec, index int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       job.Namespace,
			GenerateName:    job.Name + "-",
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      append([]string(nil), t.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if index != NoIndex {
		ix := strconv.Itoa(index)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Annotations[batchv1.JobCompletionIndexAnnotation] = ix
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = ix
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
		pod.GenerateName = GenerateNameWithIndex(job.Name, index)
	}
	return pod
}

// GenerateNameWithIndex is the pod name prefix of an Indexed Job's pod,
// "<job>-<index>-", shortened to leave room for the random suffix.
func GenerateNameWithIndex(jobName string, index int) string {
	const maxGeneratedNameLength = 63 - 5
	suffix := "-" + strconv.Itoa(index) + "-"
	prefix := jobName + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}
