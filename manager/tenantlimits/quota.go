package tenantlimits

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// QuotaRefusal is why a namespace's ResourceQuota keeps a Job from being
// dispatched: its pods would take the quota past its hard limit.
type QuotaRefusal struct {
	// Quota is the ResourceQuota's name; Resource the quota resource.
	Quota, Resource string
	// Message says it all, figures included, for the Job's Event; Gist
	// says it without the figures that change as other Jobs come and go,
	// for its condition (rewritten only when it changes).
	Message, Gist string
}

// QuotaRefuses decides whether the namespace's ResourceQuotas (as read,
// status included) have room for a Job whose pods charge adding, beside the
// Jobs of the namespace dispatched and unfinished (charged): for every
// quota whose scopes match the Job, its manager-side usage (status.used:
// pods running on the manager cluster itself) plus what the charged Jobs
// that match take plus adding must stay within hard, for each resource the
// Job charges. The first refusal, by quota then resource name, or nil.
//
// The dispatched pods run on workers, where the manager cluster's quota
// controller never sees them: jobferry counts them itself, from what it
// sealed on each Job when it placed it.
func QuotaRefuses(namespace string, quotas []corev1.ResourceQuota, charged []Charged, adding Charged) *QuotaRefusal {
	addingUsage := adding.Usage()
	quotas = slices.Clone(quotas)
	sort.Slice(quotas, func(i, j int) bool { return quotas[i].Name < quotas[j].Name })
	for i := range quotas {
		q := &quotas[i]
		if !Matches(q, adding.QuotaCharge) {
			continue
		}
		dispatched := corev1.ResourceList{}
		jobs := 0
		for _, c := range charged {
			if !Matches(q, c.QuotaCharge) {
				continue
			}
			jobs++
			for name, v := range c.Usage() {
				sum := dispatched[name]
				sum.Add(v)
				dispatched[name] = sum
			}
		}
		names := make([]string, 0, len(q.Spec.Hard))
		for name := range q.Spec.Hard {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			want, charges := addingUsage[name]
			if !charges || want.Sign() <= 0 {
				continue
			}
			hard := q.Spec.Hard[name]
			taken := q.Status.Used[name].DeepCopy()
			taken.Add(dispatched[name])
			after := taken.DeepCopy()
			after.Add(want)
			if after.Cmp(hard) <= 0 {
				continue
			}
			return &QuotaRefusal{Quota: q.Name, Resource: n,
				Gist: fmt.Sprintf("ResourceQuota %s in namespace %s has no room for this Job's pods beside the namespace's dispatched unfinished Jobs (%s, hard limit %s); it waits until enough of them finish",
					q.Name, namespace, n, hard.String()),
				Message: fmt.Sprintf(
					"ResourceQuota %s in namespace %s: %s would be %s, over its hard limit of %s: this Job's pods take %s, and %s is taken already (%s by %d dispatched unfinished Jobs of the namespace on worker clusters, %s on this cluster); it waits until enough of them finish",
					q.Name, namespace, n, after.String(), hard.String(), want.String(), taken.String(), quantity(dispatched, name), jobs, quantity(q.Status.Used, name))}
		}
	}
	return nil
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := l[name]; ok {
		return q.String()
	}
	return "0"
}

// Matches says whether the ResourceQuota's scopes (spec.scopes and
// spec.scopeSelector, all of them) take in pods that charge c, as the
// quota admission plugin matches a pod.
func Matches(q *corev1.ResourceQuota, c v1alpha1.QuotaCharge) bool {
	var selectors []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		selectors = append(selectors, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		selectors = append(selectors, q.Spec.ScopeSelector.MatchExpressions...)
	}
	for _, s := range selectors {
		if !scopeMatches(s, c) {
			return false
		}
	}
	return true
}

func scopeMatches(s corev1.ScopedResourceSelectorRequirement, c v1alpha1.QuotaCharge) bool {
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return c.Terminating
	case corev1.ResourceQuotaScopeNotTerminating:
		return !c.Terminating
	case corev1.ResourceQuotaScopeBestEffort:
		return c.BestEffort
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !c.BestEffort
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return c.CrossNamespaceAffinity
	case corev1.ResourceQuotaScopePriorityClass:
		switch s.Operator {
		case corev1.ScopeSelectorOpExists:
			return c.PriorityClassName != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return c.PriorityClassName == ""
		case corev1.ScopeSelectorOpIn:
			return slices.Contains(s.Values, c.PriorityClassName)
		case corev1.ScopeSelectorOpNotIn:
			return !slices.Contains(s.Values, c.PriorityClassName)
		}
	}
	// A scope of another kind of object (a VolumeAttributesClass): the
	// quota takes in no pod.
	return false
}
