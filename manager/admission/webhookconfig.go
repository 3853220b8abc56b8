package admission

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Defaults of the dispatch policy's flags, which the webhook registrations
// must agree with.
const (
	// DefaultDispatchNamespaceSelector selects the namespaces whose Jobs are
	// dispatched.
	DefaultDispatchNamespaceSelector = v1alpha1.DispatchNamespaceLabel + "=" + v1alpha1.DispatchEnabled
	// DefaultReservedNamespaces are reserved besides AlwaysReserved and the
	// manager's own namespace: the workers' jobferry namespace.
	DefaultReservedNamespaces = "jobferry-system"
)

// WebhookConfigurations returns the webhook registrations for a manager whose
// webhook server is reachable at baseURL (https://host:port) with a serving
// certificate signed by caBundle, running as managerUser. The opt-in webhook
// sees only Job creations in the namespaces dispatch selects, reserved ones
// excepted; the validating one only Jobs that name jobferry, in every
// namespace (a Job may set spec.managedBy itself), so the manager being down
// never blocks anyone else's Jobs. Updates of jobferry's Jobs and their
// status, but the manager's own, go to a second validating webhook that
// refuses one taking a Job past what the manager keeps of it
// (validator.handleUpdate); it fails open, as the manager suspends the
// mirror of such a Job anyway, so no one's updates are refused for the
// manager being down (one whose webhook requests are dropped on the way
// waits timeoutSeconds first).
func WebhookConfigurations(baseURL string, caBundle []byte, dispatch *metav1.LabelSelector, reserved []string, managerUser string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	optedIn := dispatch.DeepCopy()
	optedIn.MatchExpressions = append(optedIn.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: reserved,
	})
	jobs := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	// The status subresource writes labels and annotations too.
	updates := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs", "jobs/status"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobferry-opt-in"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "opt-in.jobferry.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(baseURL + MutatePath), CABundle: caBundle},
			Rules:                   jobs,
			NamespaceSelector:       optedIn,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobferry-validate"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "validate.jobferry.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(baseURL + ValidatePath), CABundle: caBundle},
			Rules:        jobs,
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "names-jobferry",
				Expression: `(has(object.spec.managedBy) && object.spec.managedBy.startsWith('jobferry.dev/')) || ` +
					`(has(object.metadata.annotations) && '` + v1alpha1.ClusterSelectorAnnotation + `' in object.metadata.annotations)`,
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}, {
			Name:         "budget.jobferry.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(baseURL + ValidatePath), CABundle: caBundle},
			Rules:        updates,
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "dispatched-by-jobferry", Expression: `has(object.spec.managedBy) && object.spec.managedBy == '` + v1alpha1.ManagerManagedBy + `'`},
				{Name: "not-jobferry-manager", Expression: "request.userInfo.username != " + celString(managerUser)},
			},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	return mutating, validating
}
