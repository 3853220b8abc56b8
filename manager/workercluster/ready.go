package workercluster

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// readyHolds are the conditions Ready summarises, in the order it looks at
// them, each with whether it holds; absent means it holds but for
// Connected, which is always written.
var readyHolds = []struct {
	condition string
	holds     func(metav1.Condition) bool
}{
	{v1alpha1.ConditionConnected, func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
	{v1alpha1.ConditionAuthorized, func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
	{v1alpha1.ConditionOriginExclusive, func(c metav1.Condition) bool { return c.Status != metav1.ConditionFalse }},
	// An expiring token still works: the worker is Ready until it expires.
	{v1alpha1.ConditionCredentialRenewal, func(c metav1.Condition) bool { return c.Reason != v1alpha1.ReasonCredentialExpired }},
}

// readyCondition is the Ready condition of the WorkerCluster whose other
// conditions are these (v1alpha1.ConditionReady): False with the reason and
// message of the first that does not hold.
func readyCondition(conditions []metav1.Condition) metav1.Condition {
	for _, h := range readyHolds {
		c := meta.FindStatusCondition(conditions, h.condition)
		if c == nil {
			if h.condition == v1alpha1.ConditionConnected {
				return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonConnecting, Message: "not looked at yet"}
			}
			continue
		}
		if !h.holds(*c) {
			return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: c.Reason, Message: h.condition + ": " + c.Message}
		}
	}
	connected := meta.FindStatusCondition(conditions, v1alpha1.ConditionConnected)
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady, Message: connected.Message}
}
