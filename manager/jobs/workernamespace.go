package jobs

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
)

// namespaceAction is what jobferry does to the worker's namespace of a
// Job before it writes the Job's mirror there.
type namespaceAction int

const (
	// namespaceAsIs: used as it is — in step, or not jobferry's to change.
	namespaceAsIs namespaceAction = iota
	// namespaceCreate: missing, and jobferry creates it.
	namespaceCreate
	// namespaceRelabel: jobferry created it, and sets its Pod Security
	// labels to the manager namespace's, which changed since.
	namespaceRelabel
	// namespaceMissing: missing, and jobferry may not create it.
	namespaceMissing
	// namespaceNotAccepted: someone else made it, and its administrator
	// has not accepted this manager's Jobs in it: no mirror goes there.
	namespaceNotAccepted
)

// namespacePlan is what jobferry will do to a worker's namespace, and the
// namespace as the mirror's pods will find it afterwards.
type namespacePlan struct {
	action namespaceAction
	// namespace is the namespace once the action is done (nil when
	// missing); its labels are what the worker's Pod Security admission
	// holds the mirror's pods to.
	namespace *corev1.Namespace
	// ours: jobferry (this installation) created it.
	ours bool
}

// acceptsManager: the worker's administrator accepted managerID's Jobs in
// ns, a namespace jobferry did not create (v1alpha1.AcceptsManagerLabel).
func acceptsManager(ns *corev1.Namespace, managerID string) bool {
	return managerID != "" && ns.Labels[v1alpha1.AcceptsManagerLabel(managerID)] == v1alpha1.AcceptsManagerValue
}

// planWorkerNamespace decides what to do with the worker's namespace name,
// as read (have; nil: it does not exist), so that the worker's Pod Security
// admission holds a mirror's pods to want, the Pod Security labels of the
// manager's namespace of the same name (podSecurityLabels). A namespace
// jobferry creates is labelled with want and with this installation's ID
// (managerID), which is how it is known for jobferry's later; one labelled
// so follows the manager's labels when they change (tightened: the worker
// would otherwise be refused as weaker; loosened: its pods refused there).
// Namespaces someone else made are never changed, and used only when
// their administrator accepted this installation's Jobs in them
// (acceptsManager) or listed them for it (listed: the WorkerCluster's
// spec.namespaces, which the worker chart's namespaced mode names): the
// same name on two clusters is no proof of the same owner, and a mirror
// runs as the ServiceAccount its template names, with the quota and
// policies of the namespace it lands in.
func planWorkerNamespace(name string, have *corev1.Namespace, want map[string]string, managerID string, may workers.NamespaceRights, listed bool) namespacePlan {
	if have == nil {
		if !may.Create {
			return namespacePlan{action: namespaceMissing}
		}
		labels := maps.Clone(want)
		if labels == nil {
			labels = map[string]string{}
		}
		if managerID != "" {
			labels[v1alpha1.ManagerIDLabel] = managerID
		}
		return namespacePlan{action: namespaceCreate, ours: true, namespace: &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}}
	}
	ours := managerID != "" && have.Labels[v1alpha1.ManagerIDLabel] == managerID
	if !ours && !listed && !acceptsManager(have, managerID) {
		return namespacePlan{action: namespaceNotAccepted, namespace: have}
	}
	if !ours || !may.Create || !may.Relabel || podSecurityInStep(have.Labels, want) {
		return namespacePlan{action: namespaceAsIs, namespace: have, ours: ours}
	}
	relabelled := have.DeepCopy()
	for _, key := range podSecurityKeys {
		delete(relabelled.Labels, key)
	}
	if relabelled.Labels == nil {
		relabelled.Labels = map[string]string{}
	}
	maps.Copy(relabelled.Labels, want)
	return namespacePlan{action: namespaceRelabel, namespace: relabelled, ours: true}
}

// podSecurityKeys are the labels Pod Security admission reads.
var podSecurityKeys = []string{psapi.EnforceLevelLabel, psapi.EnforceVersionLabel, psapi.WarnLevelLabel, psapi.WarnVersionLabel, psapi.AuditLevelLabel, psapi.AuditVersionLabel}

// podSecurityInStep: labels carry exactly the Pod Security labels want.
func podSecurityInStep(labels, want map[string]string) bool {
	for _, key := range podSecurityKeys {
		have, set := labels[key]
		wanted, wantSet := want[key]
		if set != wantSet || have != wanted {
			return false
		}
	}
	return true
}

// podSecurityLabels are the Pod Security labels of a manager namespace that
// jobferry puts on the namespace it creates on a worker (and keeps there),
// so the worker's own admission holds the mirror's pods to the same levels.
func podSecurityLabels(ns *corev1.Namespace) map[string]string {
	if ns == nil {
		return nil
	}
	out := map[string]string{}
	for _, key := range podSecurityKeys {
		if v, ok := ns.Labels[key]; ok {
			out[key] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// notAccepted says why a worker's namespace this manager did not create
// takes no mirror, and how its administrator accepts the manager's Jobs
// there.
func notAccepted(ns *corev1.Namespace, managerID string) string {
	made := "was not created by jobferry"
	if other := ns.Labels[v1alpha1.ManagerIDLabel]; other != "" {
		made = fmt.Sprintf("was created by another jobferry manager (%s)", other)
	}
	return fmt.Sprintf("namespace %s there %s and its administrator has not accepted this manager's Jobs in it "+
		"(its ServiceAccounts, quota and policies may be another team's); to accept them: kubectl label namespace %s %s=%s, on the worker",
		ns.Name, made, ns.Name, v1alpha1.AcceptsManagerLabel(managerID), v1alpha1.AcceptsManagerValue)
}
