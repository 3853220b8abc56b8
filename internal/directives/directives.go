// Package directives merges a worker cluster's scheduling directives into a
// pod template: what placement checks a Job against, and what its mirror
// carries.
package directives

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Merge returns template with a worker's scheduling directives
// merged in, so its pods land where the worker wants dispatched work:
//   - nodeSelector entries are added; the same key with another value is a
//     conflict (the Job cannot run on that worker);
//   - tolerations are added unless already present;
//   - required node affinity is combined with AND: every term of the Job is
//     joined with every term of the worker; preferred terms are appended.
//
// template is not modified.
func Merge(template corev1.PodTemplateSpec, d v1alpha1.SchedulingDirectives) (corev1.PodTemplateSpec, error) {
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
	for _, p := range worker.PreferredDuringSchedulingIgnoredDuringExecution {
		if !slices.ContainsFunc(out.PreferredDuringSchedulingIgnoredDuringExecution, func(have corev1.PreferredSchedulingTerm) bool {
			return equality.Semantic.DeepEqual(have, p)
		}) {
			out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution, p)
		}
	}
	required := worker.RequiredDuringSchedulingIgnoredDuringExecution
	switch {
	case required == nil || len(required.NodeSelectorTerms) == 0:
	case out.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0:
		out.RequiredDuringSchedulingIgnoredDuringExecution = required.DeepCopy()
	default:
		// Terms are ORed and requirements within a term ANDed, so (a|b)&(c|d)
		// becomes (a&c)|(a&d)|(b&c)|(b&d). A Job term that already holds
		// all of a worker term's requirements implies the worker's terms and
		// stays as it is, so merging the same directives twice changes
		// nothing (a template merged once is merged again when its mirror
		// is rebuilt).
		var terms []corev1.NodeSelectorTerm
		for _, j := range out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if slices.ContainsFunc(required.NodeSelectorTerms, func(w corev1.NodeSelectorTerm) bool { return termImplies(j, w) }) {
				terms = append(terms, j)
				continue
			}
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

// termImplies reports whether term j holds every requirement of term w.
func termImplies(j, w corev1.NodeSelectorTerm) bool {
	contains := func(have, want []corev1.NodeSelectorRequirement) bool {
		for _, r := range want {
			if !slices.ContainsFunc(have, func(h corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(h, r) }) {
				return false
			}
		}
		return true
	}
	return contains(j.MatchExpressions, w.MatchExpressions) && contains(j.MatchFields, w.MatchFields)
}
