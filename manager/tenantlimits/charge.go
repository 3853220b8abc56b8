package tenantlimits

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
)

// Admitted is what the namespace admitted of the Job's pods, from the pod
// its dry-run gave back (admitted): the containers' resources admission set
// or changed, and what each pod charges to the namespace's ResourceQuotas.
func Admitted(job *batchv1.Job, admitted *corev1.Pod) v1alpha1.AdmittedPods {
	return v1alpha1.AdmittedPods{
		Containers:     changedResources(job.Spec.Template.Spec.Containers, admitted.Spec.Containers),
		InitContainers: changedResources(job.Spec.Template.Spec.InitContainers, admitted.Spec.InitContainers),
		Charge:         chargeOf(&admitted.Spec),
	}
}

// Charged is what a Job charges to its namespace's quotas: its pods' charge
// times the pods it runs at once.
type Charged struct {
	v1alpha1.QuotaCharge
	Pods int64
}

// ChargedNow is the Job's charge as it is now: a Job whose parallelism grew
// since it was placed is counted with it.
func ChargedNow(job *batchv1.Job, c v1alpha1.QuotaCharge) Charged {
	return Charged{QuotaCharge: c, Pods: dispatch.PodsAtOnce(job)}
}

// Usage is the charge in the quota's resource names.
func (c Charged) Usage() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.PerPod {
		out[name] = dispatch.Times(q, c.Pods)
	}
	return out
}

// changedResources are the resources of each admitted container that differ
// from the template's container of the same name.
func changedResources(template, admitted []corev1.Container) map[string]corev1.ResourceRequirements {
	var out map[string]corev1.ResourceRequirements
	for _, a := range admitted {
		for _, t := range template {
			if t.Name != a.Name || sameResources(t.Resources, a.Resources) {
				continue
			}
			if out == nil {
				out = map[string]corev1.ResourceRequirements{}
			}
			out[a.Name] = *a.Resources.DeepCopy()
		}
	}
	return out
}

func sameResources(a, b corev1.ResourceRequirements) bool {
	return sameList(a.Requests, b.Requests) && sameList(a.Limits, b.Limits)
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// chargeOf is what a pod of spec charges to ResourceQuotas, as the quota
// admission plugin counts a pod (upstream's pod evaluator): one pod, its
// requests and limits of cpu, memory and ephemeral storage under both
// names, and requests of hugepages and extended resources.
func chargeOf(spec *corev1.PodSpec) v1alpha1.QuotaCharge {
	pod := &corev1.Pod{Spec: *spec}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	one := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1"), "count/pods": resource.MustParse("1")}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := requests[name]; ok {
			one[name] = q
			one[corev1.ResourceName("requests."+name)] = q
		}
		if q, ok := limits[name]; ok {
			one[corev1.ResourceName("limits."+name)] = q
		}
	}
	for name, q := range requests {
		switch {
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			one[name] = q
			one[corev1.ResourceName("requests."+name)] = q
		case extended(name):
			one[corev1.ResourceName("requests."+name)] = q
		}
	}
	return v1alpha1.QuotaCharge{
		PerPod:                 one,
		PriorityClassName:      spec.PriorityClassName,
		Terminating:            ptr.Deref(spec.ActiveDeadlineSeconds, -1) >= 0,
		BestEffort:             bestEffort(spec),
		CrossNamespaceAffinity: crossNamespaceAffinity(spec.Affinity),
	}
}

// extended: a resource named in a domain other than kubernetes.io's (a
// device plugin's, say example.com/gpu), which quota counts as requests.
func extended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) && !strings.HasPrefix(s, "requests.")
}

// bestEffort: the pod is of the BestEffort QoS class, as upstream's QoS
// computes it: no positive cpu or memory request or limit, at the pod's
// level (spec.resources, which decides when set) or any container's.
func bestEffort(spec *corev1.PodSpec) bool {
	positive := func(r corev1.ResourceRequirements) bool {
		for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := l[name]; ok && q.Sign() > 0 {
					return true
				}
			}
		}
		return false
	}
	if spec.Resources != nil && positive(*spec.Resources) {
		return false
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if positive(c.Resources) {
				return false
			}
		}
	}
	return true
}

// crossNamespaceAffinity: a pod affinity or anti-affinity term names
// namespaces or selects them.
func crossNamespaceAffinity(a *corev1.Affinity) bool {
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
