package mirror

import (
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobstatus"
)

// SpecUpdate carries to an existing mirror m what changed in desired, the
// mirror Build makes of the manager Job as it is now. It copies the fields the
// API server lets a user change on an existing Job (upstream
// ValidateJobSpecUpdate): parallelism, completions (elastic Indexed Jobs),
// activeDeadlineSeconds, backoffLimit, maxFailedIndexes and suspend; and,
// while the mirror's pod template is mutable (suspended and not running,
// KEP-2926; startedMayChange as TemplateMutable takes it, for the worker's
// version), the template's scheduling directives, labels and annotations.
// It returns the updated mirror and the fields that changed, none when m is
// up to date. The worker's API server has the last word: a change it refuses
// is the caller's to report.
func SpecUpdate(desired, m *batchv1.Job, startedMayChange bool) (*batchv1.Job, []string) {
	// A shallow copy: it is asked on every status change of every mirror,
	// and a field that changes gets a value of its own below (m's pointers,
	// maps and slices are never written through).
	updated := new(batchv1.Job)
	*updated = *m
	spec, want := &updated.Spec, &desired.Spec
	var changed []string
	carry := func(field string, dst **int32, src *int32) {
		if ptr.Equal(*dst, src) {
			return
		}
		*dst = nil
		if src != nil {
			*dst = ptr.To(*src)
		}
		changed = append(changed, field)
	}
	carry("parallelism", &spec.Parallelism, want.Parallelism)
	carry("completions", &spec.Completions, want.Completions)
	carry("backoffLimit", &spec.BackoffLimit, want.BackoffLimit)
	carry("maxFailedIndexes", &spec.MaxFailedIndexes, want.MaxFailedIndexes)
	if !ptr.Equal(spec.ActiveDeadlineSeconds, want.ActiveDeadlineSeconds) {
		spec.ActiveDeadlineSeconds = nil
		if want.ActiveDeadlineSeconds != nil {
			spec.ActiveDeadlineSeconds = ptr.To(*want.ActiveDeadlineSeconds)
		}
		changed = append(changed, "activeDeadlineSeconds")
	}
	if ptr.Deref(spec.Suspend, false) != ptr.Deref(want.Suspend, false) {
		spec.Suspend = ptr.To(ptr.Deref(want.Suspend, false))
		changed = append(changed, "suspend")
	}
	if TemplateMutable(m, startedMayChange) && !sameSchedulingTemplate(m.Spec.Template, want.Template) {
		carryScheduling(&spec.Template, want.Template)
		changed = append(changed, "template")
	}
	return updated, changed
}

// TemplateMutable mirrors the API server's rule for changing the pod
// template's scheduling directives of a Job (KEP-2926): the Job is
// suspended, has not started and runs no pod; where startedMayChange (the
// Job's API server has MutableSchedulingDirectivesForSuspendedJobs, on by
// default from v1.36: StartedTemplatesMutable) also once started, while it
// shows Suspended=True.
func TemplateMutable(job *batchv1.Job, startedMayChange bool) bool {
	return ptr.Deref(job.Spec.Suspend, false) &&
		(job.Status.StartTime == nil || startedMayChange && jobstatus.ConditionTrue(job.Status, batchv1.JobSuspended)) &&
		job.Status.Active == 0
}

// StartedTemplatesMutable says whether an API server of version v lets a
// suspended Job that has started change its template's scheduling
// directives (MutableSchedulingDirectivesForSuspendedJobs, on by default
// from v1.36). A version not known is taken as one that does not.
func StartedTemplatesMutable(v *version.Version) bool {
	return v != nil && v.AtLeast(version.MajorMinor(1, 36))
}

// sameSchedulingTemplate compares what carryScheduling copies, ignoring the
// labels the worker's API server derives from the mirror's own UID.
func sameSchedulingTemplate(have, want corev1.PodTemplateSpec) bool {
	return equality.Semantic.DeepEqual(WithoutGeneratedLabels(have.Labels), WithoutGeneratedLabels(want.Labels)) &&
		equality.Semantic.DeepEqual(have.Annotations, want.Annotations) &&
		equality.Semantic.DeepEqual(have.Spec.NodeSelector, want.Spec.NodeSelector) &&
		equality.Semantic.DeepEqual(have.Spec.Tolerations, want.Spec.Tolerations) &&
		equality.Semantic.DeepEqual(nodeAffinity(have.Spec), nodeAffinity(want.Spec)) &&
		equality.Semantic.DeepEqual(have.Spec.SchedulingGates, want.Spec.SchedulingGates)
}

// carryScheduling copies the template fields a suspended Job's template may
// change, keeping the generated labels the worker's API server set.
func carryScheduling(dst *corev1.PodTemplateSpec, src corev1.PodTemplateSpec) {
	labels := WithoutGeneratedLabels(src.Labels)
	for _, l := range generatedLabels {
		if v, ok := dst.Labels[l]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[l] = v
		}
	}
	dst.Labels = labels
	dst.Annotations = maps.Clone(src.Annotations)
	dst.Spec.NodeSelector = maps.Clone(src.Spec.NodeSelector)
	dst.Spec.Tolerations = src.Spec.DeepCopy().Tolerations
	dst.Spec.SchedulingGates = src.Spec.DeepCopy().SchedulingGates
	// A new affinity: dst's may be shared with the Job it was copied from.
	affinity := &corev1.Affinity{}
	if dst.Spec.Affinity != nil {
		affinity = dst.Spec.Affinity.DeepCopy()
	}
	affinity.NodeAffinity = nodeAffinity(src.Spec).DeepCopy()
	dst.Spec.Affinity = affinity
	if affinity.NodeAffinity == nil && equality.Semantic.DeepEqual(*affinity, corev1.Affinity{}) {
		// The API server lets the whole affinity go only when it held
		// nothing besides node affinity.
		dst.Spec.Affinity = nil
	}
}

func nodeAffinity(spec corev1.PodSpec) *corev1.NodeAffinity {
	if spec.Affinity == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity
}
