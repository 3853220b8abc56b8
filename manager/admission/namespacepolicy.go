package admission

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// NamespacePolicy returns the ValidatingAdmissionPolicy, and its binding,
// that a worker cluster puts around the manager's rights on its namespaces
// (createNamespacesRight, relabelNamespacesRight: RBAC can only grant them
// on every namespace). As the manager's identity there (managerUser):
//   - a namespace is created only as planWorkerNamespace makes one: labelled
//     with v1alpha1.ManagerIDLabel, otherwise with Pod Security labels only,
//     no annotations, finalizers or owners;
//   - a namespace is changed only when it carries v1alpha1.ManagerIDLabel
//     (jobferry created it), and then only in its Pod Security labels;
//   - a namespace is deleted only when it carries v1alpha1.ManagerIDLabel
//     and no label but Pod Security's and the API server's name label,
//     no finalizer and no owner (as jobferry made it: the orphan collector deletes those once the
//     manager's namespace of that name is gone), never a kube-* one,
//     default, or the namespace of the manager's identity itself.
//
// So the worker's own namespaces, kube-system's Pod Security level above all,
// are out of the manager's reach. With managerID (the worker chart's
// managerIdentity.managerID) the label must name that manager, on a create
// and on the namespace changed: then one manager's token cannot change the
// Pod Security level of another's namespaces, nor delete them. The worker chart ships the
// same (a test compares them); the messages name what was refused.
func NamespacePolicy(name, managerUser, managerID string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return namespacePolicy(name, managerUser, celString(managerID))
}

// NamespacePolicyTemplate is NamespacePolicy with ManagerIDPlaceholder for
// the manager's ID, as the worker chart's file holds it.
func NamespacePolicyTemplate(name, managerUser string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return namespacePolicy(name, managerUser, ManagerIDPlaceholder)
}

// namespacePolicy is NamespacePolicy with the manager's ID as a CEL
// expression.
func namespacePolicy(name, managerUser, managerIDExpr string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	const podSecurity = "k.startsWith('pod-security.kubernetes.io/')"
	idLabel := celString(v1alpha1.ManagerIDLabel)
	// ownedBy: labels name this manager (any manager's ID, unpinned).
	ownedBy := func(labels string) string {
		return fmt.Sprintf("%[2]s in %[1]s && (variables.managerID == '' || %[1]s[%[2]s] == variables.managerID)", labels, idLabel)
	}
	meta := func(object, field, empty string) string {
		return fmt.Sprintf("(has(%[1]s.metadata.%[2]s) ? %[1]s.metadata.%[2]s : %[3]s)", object, field, empty)
	}
	sameMeta := fmt.Sprintf("%s == %s && %s == %s && %s == %s",
		meta("object", "annotations", "{}"), meta("oldObject", "annotations", "{}"),
		meta("object", "finalizers", "[]"), meta("oldObject", "finalizers", "[]"),
		meta("object", "ownerReferences", "[]"), meta("oldObject", "ownerReferences", "[]"))
	noMeta := fmt.Sprintf("size(%s) == 0 && size(%s) == 0 && size(%s) == 0",
		meta("object", "annotations", "{}"), meta("object", "finalizers", "[]"), meta("object", "ownerReferences", "[]"))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: onOperations([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}, "", "namespaces"),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "jobferry-manager", Expression: fmt.Sprintf("request.userInfo.username == %s", celString(managerUser))},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "managerID", Expression: managerIDExpr},
				// A DELETE has no object, only the oldObject.
				{Name: "labels", Expression: "object != null && has(object.metadata.labels) ? object.metadata.labels : {}"},
				{Name: "oldLabels", Expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
				// Labels other than Pod Security's that a create sets, but
				// the installation's ID and the API server's own name label.
				{Name: "otherCreated", Expression: fmt.Sprintf("variables.labels.filter(k, !%s && k != %s && k != %s)",
					podSecurity, idLabel, celString(corev1.LabelMetadataName))},
				// Labels other than Pod Security's, the installation's ID
				// and the name label that a namespace being deleted has:
				// someone else marked it.
				{Name: "otherOld", Expression: fmt.Sprintf("variables.oldLabels.filter(k, !%s && k != %s && k != %s)",
					podSecurity, idLabel, celString(corev1.LabelMetadataName))},
				// Labels other than Pod Security's that an update sets,
				// changes or removes.
				{Name: "otherChanged", Expression: fmt.Sprintf("variables.labels.filter(k, !%[1]s && !(k in variables.oldLabels && variables.oldLabels[k] == variables.labels[k])) + "+
					"variables.oldLabels.filter(k, !%[1]s && !(k in variables.labels))", podSecurity)},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression: fmt.Sprintf("request.operation != 'CREATE' || (%s && size(variables.otherCreated) == 0 && %s)", ownedBy("variables.labels"), noMeta),
					MessageExpression: fmt.Sprintf(`'jobferry\'s manager may create a namespace only labelled %s (its own), with no other labels but Pod Security\'s, '+
'and no annotations, finalizers or owners: namespace ' + object.metadata.name + (size(variables.otherCreated) > 0 ? ' has labels ' + variables.otherCreated.join(', ') : ' is not so')`,
						v1alpha1.ManagerIDLabel),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: fmt.Sprintf("request.operation != 'UPDATE' || (%s)", ownedBy("variables.oldLabels")),
					MessageExpression: fmt.Sprintf(`'jobferry\'s manager may change only the namespaces it created (labelled %s' + (variables.managerID == '' ? '' : '=' + variables.managerID) + '); namespace ' + object.metadata.name + ' is not one'`,
						v1alpha1.ManagerIDLabel),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: fmt.Sprintf("request.operation != 'UPDATE' || (size(variables.otherChanged) == 0 && %s)", sameMeta),
					MessageExpression: `'jobferry\'s manager may change only the Pod Security labels of a namespace it created: the request to namespace ' + object.metadata.name + ' changes ' +
(size(variables.otherChanged) > 0 ? 'labels ' + variables.otherChanged.join(', ') : 'its annotations, finalizers or owners')`,
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: fmt.Sprintf("request.operation != 'DELETE' || (%s && size(variables.otherOld) == 0 && size(%s) == 0 && size(%s) == 0 && "+
						"!oldObject.metadata.name.startsWith('kube-') && oldObject.metadata.name != 'default' && "+
						"!request.userInfo.username.startsWith('system:serviceaccount:' + oldObject.metadata.name + ':'))",
						ownedBy("variables.oldLabels"), meta("oldObject", "finalizers", "[]"), meta("oldObject", "ownerReferences", "[]")),
					MessageExpression: fmt.Sprintf(`'jobferry\'s manager may delete only the namespaces it created (labelled %s' + (variables.managerID == '' ? '' : '=' + variables.managerID) + ', with no other labels but Pod Security\'s, no finalizers or owners), never kube-*, default or its own; namespace ' + oldObject.metadata.name + ' is not one' + (size(variables.otherOld) > 0 ? ': it has labels ' + variables.otherOld.join(', ') : '')`,
						v1alpha1.ManagerIDLabel),
					Reason: ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	return policy, denyBinding(name)
}
