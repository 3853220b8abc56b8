package admission

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// ManagerJobsPolicy returns the ValidatingAdmissionPolicy, and its binding,
// that a worker cluster puts around the manager's rights on its Jobs (RBAC
// grants them on every namespace, or on the namespaces listed). As the
// manager's identity there (managerUser):
//   - no Job is written in a kube-* namespace, nor in the namespace of the
//     identity itself (the worker chart's);
//   - a Job is created or changed only in a namespace jobferry created
//     (labelled v1alpha1.ManagerIDLabel), one whose administrator accepted a
//     manager's Jobs in it (a v1alpha1.AcceptsManagerLabelPrefix label set to
//     v1alpha1.AcceptsManagerValue), or one of listed (the worker chart's
//     namespaced mode: its administrator named them), as
//     planWorkerNamespace places mirrors;
//   - a Job is deleted there too, or where it is a mirror (labelled
//     v1alpha1.ManagerIDLabel): a namespace whose acceptance was withdrawn
//     still has its mirrors cleaned up.
//
// With managerID (the manager's installation ID, which the worker chart
// takes as managerIdentity.managerID) the labels must name that manager:
// its own namespaces and the ones accepted for it, not another manager's.
// Without it the policy matches any manager's labels (the manager itself
// matches its ID): whoever holds the manager's token still cannot make a
// Job run as the ServiceAccount of a namespace no manager was given, nor
// under a system namespace's rights. Reads (pods, logs, Events for
// inspection) are not admitted, so no policy can narrow them: RBAC does,
// with managerIdentity.namespaces.
func ManagerJobsPolicy(name, managerUser, managerID string, listed ...string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return managerJobsPolicy(name, managerUser, celString(managerID), celList(listed))
}

// ManagerIDPlaceholder stands for the CEL string of the manager's ID (the
// empty string when the chart is given none) in the spec
// ManagerJobsPolicyTemplate gives.
const ManagerIDPlaceholder = "__MANAGER_ID__"

// ListedNamespaces stands for the CEL list of the namespaces the worker
// chart lists in the spec ManagerJobsPolicyTemplate gives: the chart's
// template puts the list in (a whole expression, so no quoting of the
// written YAML is in its way).
const ListedNamespaces = "__LISTED_NAMESPACES__"

// ManagerJobsPolicyTemplate is ManagerJobsPolicy with ListedNamespaces for
// the list of namespaces, as the worker chart's file holds it.
func ManagerJobsPolicyTemplate(name, managerUser string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return managerJobsPolicy(name, managerUser, ManagerIDPlaceholder, ListedNamespaces)
}

// managerJobsPolicy is ManagerJobsPolicy with the manager's ID and listed as
// CEL expressions.
func managerJobsPolicy(name, managerUser, managerID, listed string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	idLabel, prefix, yes := celString(v1alpha1.ManagerIDLabel), celString(v1alpha1.AcceptsManagerLabelPrefix), celString(v1alpha1.AcceptsManagerValue)
	anyManager := fmt.Sprintf("%s in variables.namespaceLabels || variables.namespaceLabels.exists(k, k.startsWith(%s) && variables.namespaceLabels[k] == %s)", idLabel, prefix, yes)
	thisManager := fmt.Sprintf("variables.namespaceLabels.exists(k, (k == %s && variables.namespaceLabels[k] == variables.managerID) || (k == %s + variables.managerID && variables.namespaceLabels[k] == %s))", idLabel, prefix, yes)
	accepted := fmt.Sprintf("(variables.managerID == '' ? (%s) : (%s)) || request.namespace in variables.listed", anyManager, thisManager)
	// A mirror's own label names the manager that made it.
	itsMirror := fmt.Sprintf("%s in variables.oldLabels && (variables.managerID == '' || variables.oldLabels[%s] == variables.managerID)", idLabel, idLabel)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: onOperations([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}, "batch", "jobs"),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "jobferry-manager", Expression: fmt.Sprintf("request.userInfo.username == %s", celString(managerUser))},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "namespaceLabels", Expression: "namespaceObject != null && has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}"},
				{Name: "oldLabels", Expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
				{Name: "managerID", Expression: managerID},
				{Name: "listed", Expression: listed},
				{Name: "accepted", Expression: accepted},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					// A ServiceAccount's username is system:serviceaccount:<namespace>:<name>.
					Expression: "!request.namespace.startsWith(" + celString(ReservedPrefix) + ") && !request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')",
					MessageExpression: `'jobferry\'s manager may not write Jobs in namespace ' + request.namespace +
': the kube-* namespaces and the namespace of its own identity are out of its reach'`,
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: "variables.accepted || (request.operation == 'DELETE' && " + itsMirror + ")",
					MessageExpression: fmt.Sprintf(`'jobferry\'s manager may write Jobs only in the namespaces it created (labelled %s), that their administrator accepted its Jobs in (labelled %s<its ID>=%s) or that the worker chart lists: namespace ' +
request.namespace + ' is none of them'`, v1alpha1.ManagerIDLabel, v1alpha1.AcceptsManagerLabelPrefix, v1alpha1.AcceptsManagerValue),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	return policy, denyBinding(name)
}
