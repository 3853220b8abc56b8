package dispatch

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// MergeDirectives returns template with a worker's scheduling directives
// merged in, so its pods land where the worker wants dispatched work:
//   - nodeSelector entries are added; the same key with another value is a
//     conflict (the Job cannot run on that worker);
//   - tolerations are added unless already present;
//   - required node affinity is combined with AND: every term of the Job is
//     joined with every term of the worker; preferred terms are appended.
//
// template is not modified.
func MergeDirectives(template corev1.PodTemplateSpec, d v1alpha1.SchedulingDirectives) (corev1.PodTemplateSpec, error) {
	out := *template.DeepCopy()
	spec := &out.Spec
	for k, v := range d.NodeSelector {
		if have, ok := spec.NodeSelector[k]; ok && have != v {
			return template, fmt.Errorf("nodeSelector %s=%s conflicts with the worker's %s=%s", k, have, k, v)
		}
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[k] = v
	}
	for _, t := range d.Tolerations {
		if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, t) }) {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
	if d.NodeAffinity != nil {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		spec.Affinity.NodeAffinity = mergeNodeAffinity(spec.Affinity.NodeAffinity, d.NodeAffinity)
	}
	return out, nil
}

func mergeNodeAffinity(job, worker *corev1.NodeAffinity) *corev1.NodeAffinity {
	if job == nil {
		return worker.DeepCopy()
	}
	out := job.DeepCopy()
	out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution,
		worker.PreferredDuringSchedulingIgnoredDuringExecution...)
	required := worker.RequiredDuringSchedulingIgnoredDuringExecution
	switch {
	case required == nil || len(required.NodeSelectorTerms) == 0:
	case out.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0:
		out.RequiredDuringSchedulingIgnoredDuringExecution = required.DeepCopy()
	default:
		// Terms are ORed and requirements within a term ANDed, so (a|b)&(c|d)
		// becomes (a&c)|(a&d)|(b&c)|(b&d).
		var terms []corev1.NodeSelectorTerm
		for _, j := range out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, w := range required.NodeSelectorTerms {
				terms = append(terms, corev1.NodeSelectorTerm{
					MatchExpressions: append(slices.Clone(j.MatchExpressions), w.MatchExpressions...),
					MatchFields:      append(slices.Clone(j.MatchFields), w.MatchFields...),
				})
			}
		}
		out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
	}
	return out
}
