package workercluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestReadyCondition(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message}
	}
	connected := cond(v1alpha1.ConditionConnected, metav1.ConditionTrue, v1alpha1.ReasonConnected, "connected to https://w1")
	authorized := cond(v1alpha1.ConditionAuthorized, metav1.ConditionTrue, v1alpha1.ReasonAuthorized, "every right")
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		status     metav1.ConditionStatus
		reason     string
		message    string
	}{
		{"never looked at", nil, metav1.ConditionUnknown, v1alpha1.ReasonConnecting, "not looked at yet"},
		{"connected, rights not reviewed yet", []metav1.Condition{connected}, metav1.ConditionTrue, v1alpha1.ReasonReady, "connected to https://w1"},
		{"all hold", []metav1.Condition{connected, authorized,
			cond(v1alpha1.ConditionOriginExclusive, metav1.ConditionTrue, v1alpha1.ReasonOriginExclusive, ""),
			cond(v1alpha1.ConditionCredentialRenewal, metav1.ConditionTrue, v1alpha1.ReasonCredentialValid, "")}, metav1.ConditionTrue, v1alpha1.ReasonReady, "connected to https://w1"},
		{"unreachable", []metav1.Condition{cond(v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonUnreachable, "no answer"), authorized},
			metav1.ConditionFalse, v1alpha1.ReasonUnreachable, "Connected: no answer"},
		{"connecting", []metav1.Condition{cond(v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonConnecting, "syncing")},
			metav1.ConditionFalse, v1alpha1.ReasonConnecting, "Connected: syncing"},
		{"missing rights", []metav1.Condition{connected, cond(v1alpha1.ConditionAuthorized, metav1.ConditionFalse, v1alpha1.ReasonMissingRights, "create jobs")},
			metav1.ConditionFalse, v1alpha1.ReasonMissingRights, "Authorized: create jobs"},
		{"rights unknown", []metav1.Condition{connected, cond(v1alpha1.ConditionAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonRightsUnknown, "no answer")},
			metav1.ConditionFalse, v1alpha1.ReasonRightsUnknown, "Authorized: no answer"},
		{"origin shared", []metav1.Condition{connected, authorized, cond(v1alpha1.ConditionOriginExclusive, metav1.ConditionFalse, v1alpha1.ReasonOriginShared, "another manager")},
			metav1.ConditionFalse, v1alpha1.ReasonOriginShared, "OriginExclusive: another manager"},
		{"token expiring still works", []metav1.Condition{connected, authorized, cond(v1alpha1.ConditionCredentialRenewal, metav1.ConditionFalse, v1alpha1.ReasonCredentialExpiring, "renewal failed")},
			metav1.ConditionTrue, v1alpha1.ReasonReady, "connected to https://w1"},
		{"token expired", []metav1.Condition{connected, authorized, cond(v1alpha1.ConditionCredentialRenewal, metav1.ConditionFalse, v1alpha1.ReasonCredentialExpired, "expired at noon")},
			metav1.ConditionFalse, v1alpha1.ReasonCredentialExpired, "CredentialRenewal: expired at noon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readyCondition(tc.conditions)
			if got.Type != v1alpha1.ConditionReady || got.Status != tc.status || got.Reason != tc.reason || got.Message != tc.message {
				t.Errorf("Ready = %s %s %q, want %s %s %q", got.Status, got.Reason, got.Message, tc.status, tc.reason, tc.message)
			}
		})
	}
}
