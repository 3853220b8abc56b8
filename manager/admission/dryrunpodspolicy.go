package admission

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DryRunPodsPolicy returns the ValidatingAdmissionPolicy, and its binding,
// that let the manager's identity (managerUser) create pods only as a
// server-side dry-run: the manager dry-runs one pod of each Job before its
// first mirror, so the manager cluster's admission judges what would run
// (package tenantlimits), and needs `create pods` in every namespace it
// dispatches from for that. Without this policy that right would let
// whoever holds the manager's token run a pod, with any ServiceAccount, in
// any namespace; with it, nothing it creates is ever stored. The manager
// chart ships the same (a test compares them).
func DryRunPodsPolicy(name, managerUser string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: onOperations([]admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "", "pods"),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "jobferry-manager", Expression: fmt.Sprintf("request.userInfo.username == %s", celString(managerUser))},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.dryRun == true",
				Message: "jobferry's manager may create pods only as a server-side dry-run (dryRun=All), " +
					"to have this cluster's admission judge a Job's pods before it dispatches the Job",
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	return policy, denyBinding(name)
}
