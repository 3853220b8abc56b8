package workers

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/sharedstrings"
	"github.com/jobferry/jobferry/manager/jobstate"
)

// maxCachedTemplateMetadata bounds the pod template labels and annotations
// kept of a cached mirror, each (a Job's template annotations may hold 256
// KiB, its labels more): a Job with jobferry's labels is anyone's to create
// who may create Jobs in the worker namespace.
const maxCachedTemplateMetadata = 64 << 10

// SlimMirror keeps of a Job in a worker's cache (any Job with this
// installation's origin label, the manager's mirrors and whatever else
// carries the label) what the manager reads, and nothing else: its identity
// and jobferry's labels; the spec fields a change of the manager Job is
// carried to (mirror.SpecUpdate) and the pod template's scheduling fields
// and metadata (bounded); its status, which the worker's Job controller
// writes. Containers, volumes and the rest of the pod spec are what makes a
// Job large, and the manager never reads them from a worker: it writes the
// mirror from the manager Job, and updates it with patches of the fields it
// compares.
func SlimMirror(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	spec, template := job.Spec, job.Spec.Template
	out := &batchv1.Job{
		TypeMeta: job.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sharedstrings.Canonical(job.Namespace), Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion, Generation: job.Generation,
			CreationTimestamp: job.CreationTimestamp, DeletionTimestamp: job.DeletionTimestamp, Labels: jobferryLabels(job.Labels),
		},
		Spec: batchv1.JobSpec{
			Parallelism: spec.Parallelism, Completions: spec.Completions, ActiveDeadlineSeconds: spec.ActiveDeadlineSeconds,
			BackoffLimit: spec.BackoffLimit, BackoffLimitPerIndex: spec.BackoffLimitPerIndex, MaxFailedIndexes: spec.MaxFailedIndexes,
			Suspend: spec.Suspend, CompletionMode: spec.CompletionMode, ManagedBy: spec.ManagedBy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sharedKeys(bounded(template.Labels)), Annotations: sharedKeys(bounded(template.Annotations))},
				Spec: corev1.PodSpec{NodeSelector: template.Spec.NodeSelector, Tolerations: template.Spec.Tolerations,
					SchedulingGates: template.Spec.SchedulingGates},
			},
		},
		Status: job.Status,
	}
	sharedstrings.Conditions(out.Status.Conditions)
	if a := template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		out.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
	}
	return out, nil
}

// jobferryLabels are the jobferry.dev/ labels of a Job: the only ones the
// manager reads on a worker. Their keys, and the values every mirror of
// this manager repeats (its origin, the attempt), are shared copies
// (package sharedstrings); the origin UID is the manager Job's own.
func jobferryLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		if strings.HasPrefix(k, jobstate.Prefix) {
			if out == nil {
				out = map[string]string{}
			}
			if k != v1alpha1.OriginUIDLabel {
				v = sharedstrings.Canonical(v)
			}
			out[sharedstrings.Canonical(k)] = v
		}
	}
	return out
}

// sharedKeys is m with its keys shared (package sharedstrings).
func sharedKeys(m map[string]string) map[string]string {
	sharedstrings.Keys(m)
	return m
}

// bounded is m, or nil when its keys and values hold more than
// maxCachedTemplateMetadata: the mirror then looks different from what the
// manager Job would make, and a carry (while the mirror's template may
// change) writes what it should hold.
func bounded(m map[string]string) map[string]string {
	size := 0
	for k, v := range m {
		if size += len(k) + len(v); size > maxCachedTemplateMetadata {
			return nil
		}
	}
	return m
}
