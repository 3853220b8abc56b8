package admission

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
)

// StatePolicy returns the ValidatingAdmissionPolicy, and its binding, that
// keep jobferry's state on Jobs jobferry's: no one but the manager's
// identity (managerUser, e.g. system:serviceaccount:jobferry-system:
// jobferry-manager) may set, change or remove a jobferry.dev/ annotation
// or label of a Job other than the user inputs (cluster selector,
// on-worker-lost), at creation or update (the status subresource's
// included), in any namespace; the message
// names the keys. The opt-in webhook's jobferry.dev/held-for-placement
// "true" is let through at creation, as the webhook sets it for the Job's
// author. A spec.managedBy in the jobferry.dev/ domain other than the
// manager's is refused at creation too (jobferry.dev/worker is for mirrors
// on worker clusters; nothing on this cluster would run such a Job).
//
// The API server evaluates the policy itself, so it holds while the
// manager's webhooks are down or unregistered; the manager chart ships the
// same (a test compares them). The manager's seal (package jobstate) is the
// backstop where the policy is missing.
func StatePolicy(name, managerUser string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			// The status subresource is a door to the labels and
			// annotations too.
			MatchConstraints: onCreateAndUpdate("batch", "jobs", "jobs/status"),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "not-jobferry-manager", Expression: fmt.Sprintf("request.userInfo.username != %s", celString(managerUser))},
				{Name: "names-jobferry", Expression: namesJobferry},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "userInputs", Expression: celList(jobstate.UserInputs)},
				{Name: "annotations", Expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
				{Name: "oldAnnotations", Expression: "oldObject != null && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
				{Name: "labels", Expression: "has(object.metadata.labels) ? object.metadata.labels : {}"},
				{Name: "oldLabels", Expression: "oldObject != null && has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"},
				{Name: "changedAnnotations", Expression: changed("annotations", fmt.Sprintf(
					"!(request.operation == 'CREATE' && k == %s && variables.annotations[k] == 'true')", celString(v1alpha1.HeldForPlacementAnnotation)))},
				{Name: "changedLabels", Expression: changed("labels", "")},
			},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression:        "size(variables.changedAnnotations) == 0",
					MessageExpression: stateMessage("annotation", "changedAnnotations"),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "size(variables.changedLabels) == 0",
					MessageExpression: stateMessage("label", "changedLabels"),
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: fmt.Sprintf("request.operation != 'CREATE' || !has(object.spec.managedBy) || !object.spec.managedBy.startsWith(%s) || object.spec.managedBy == %s",
						celString(jobstate.Prefix), celString(v1alpha1.ManagerManagedBy)),
					MessageExpression: fmt.Sprintf(`'spec.managedBy "' + object.spec.managedBy + '" names no controller of this cluster, so nothing would ever run this Job: '+
'use "%s" to dispatch it to a worker cluster ("%s" is for the mirrors on worker clusters), or leave spec.managedBy unset to run it here'`,
						v1alpha1.ManagerManagedBy, v1alpha1.WorkerManagedBy),
					Reason: ptr.To(metav1.StatusReasonInvalid),
				},
			},
		},
	}
	return policy, denyBinding(name)
}

// namesJobferry lets the policy look only at Jobs that carry anything of
// jobferry's, before or after the request.
const namesJobferry = `(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.lowerAscii().startsWith('jobferry.dev/'))) || ` +
	`(has(object.metadata.labels) && object.metadata.labels.exists(k, k.lowerAscii().startsWith('jobferry.dev/'))) || ` +
	`(oldObject != null && has(oldObject.metadata.annotations) && oldObject.metadata.annotations.exists(k, k.lowerAscii().startsWith('jobferry.dev/'))) || ` +
	`(oldObject != null && has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k, k.lowerAscii().startsWith('jobferry.dev/'))) || ` +
	`(has(object.spec.managedBy) && object.spec.managedBy.startsWith('jobferry.dev/'))`

// changed is the CEL list of jobferry's keys of one map (annotations or
// labels) that the request sets, changes or removes, but those allowed.
func changed(field, allowed string) string {
	owned := "k.lowerAscii().startsWith('jobferry.dev/') && !(k in variables.userInputs)"
	if allowed != "" {
		allowed = " && " + allowed
	}
	return fmt.Sprintf("variables.%[1]s.filter(k, %[2]s && !(k in variables.old%[3]s && variables.old%[3]s[k] == variables.%[1]s[k])%[4]s) + "+
		"variables.old%[3]s.filter(k, %[2]s && !(k in variables.%[1]s))",
		field, owned, strings.ToUpper(field[:1])+field[1:], allowed)
}

// stateMessage names the keys a request may not write.
func stateMessage(what, variable string) string {
	return fmt.Sprintf(`(size(variables.%[2]s) == 1 ? '%[1]s ' : '%[1]ss ') + variables.%[2]s.join(', ') + ' of a Job: jobferry\'s own state, which only jobferry\'s manager may write; '+
'leave them out of the Jobs you create and as they are on the Jobs you update (the user inputs are %[3]s)'`,
		what, variable, strings.Join(jobstate.UserInputs, " and "))
}

// celString quotes s as a CEL string literal.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// celList is a CEL list of string literals.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = celString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// onCreateAndUpdate matches creations and updates of resources (and
// subresources) of one group.
func onCreateAndUpdate(group string, resources ...string) *admissionregistrationv1.MatchResources {
	return onOperations([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, group, resources...)
}

// onOperations matches the operations on resources (and subresources) of
// one group, at v1.
func onOperations(ops []admissionregistrationv1.OperationType, group string, resources ...string) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources},
			},
		}},
	}
}

// denyBinding binds policy name cluster-wide, denying what it refuses.
func denyBinding(name string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}
