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
//     (labelled v1alpha1.ManagerIDLabel) or whose administrator accepted a
//     manager's Jobs in it (v1alpha1.AcceptsManagerLabel), as
//     planWorkerNamespace places mirrors;
//   - a Job is deleted there too, or where it is a mirror (labelled
//     v1alpha1.ManagerIDLabel): a namespace whose acceptance was withdrawn
//     still has its mirrors cleaned up.
//
// The policy matches the labels' keys, not their values: the worker chart
// does not know the manager's installation ID, and the manager itself
// matches the value. So whoever holds the manager's token cannot make a Job
// run as another team's ServiceAccount, nor under a system namespace's
// rights. Reads (pods, logs, Events for inspection) are not admitted, so no
// policy can narrow them: RBAC does, with managerIdentity.namespaces.
func ManagerJobsPolicy(name, managerUser string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	has := func(labels, key string) string { return fmt.Sprintf("%s in %s", celString(key), labels) }
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "jobferry-manager", Expression: fmt.Sprintf("request.userInfo.username == %s", celString(managerUser))},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "namespaceLabels", Expression: "namespaceObject != null && has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}"},
				{Name: "oldLabels", Expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
				{Name: "accepted", Expression: has("variables.namespaceLabels", v1alpha1.ManagerIDLabel) + " || " + has("variables.namespaceLabels", v1alpha1.AcceptsManagerLabel)},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					// A ServiceAccount's username is system:serviceaccount:<namespace>:<name>.
					Expression: "!request.namespace.startsWith('kube-') && !request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')",
					MessageExpression: `'jobferry\'s manager may not write Jobs in namespace ' + request.namespace +
': the kube-* namespaces and the namespace of its own identity are out of its reach'`,
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: fmt.Sprintf("variables.accepted || (request.operation == 'DELETE' && %s)", has("variables.oldLabels", v1alpha1.ManagerIDLabel)),
					MessageExpression: fmt.Sprintf(`'jobferry\'s manager may write Jobs only in the namespaces it created (labelled %s) or that their administrator accepted its Jobs in (labelled %s): namespace ' +
request.namespace + ' is neither'`, v1alpha1.ManagerIDLabel, v1alpha1.AcceptsManagerLabel),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	return policy, denyBinding(name)
}
