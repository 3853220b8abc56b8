package mirror

import (
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// WithAdmitted gives the pod spec the containers' resources the manager
// namespace's admission set (AdmittedPods: LimitRange defaults), as the
// mirror runs it.
func WithAdmitted(spec *corev1.PodSpec, admitted v1alpha1.AdmittedPods) {
	apply := func(cs []corev1.Container, resources map[string]corev1.ResourceRequirements) {
		for i := range cs {
			if r, ok := resources[cs[i].Name]; ok {
				cs[i].Resources = *r.DeepCopy()
			}
		}
	}
	apply(spec.Containers, admitted.Containers)
	apply(spec.InitContainers, admitted.InitContainers)
}
