package jobs

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

// Two managers with one origin on one worker: the other's mirror of a Job
// of the same name is neither fenced nor deleted with this manager's Job,
// and this manager's Job goes elsewhere.
func TestAnotherInstallationsMirrorIsLeftAlone(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.r.Config.ManagerID = "manager-a"
	ctx := context.Background()
	theirs := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", Labels: map[string]string{
		v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "their-job", v1alpha1.DispatchAttemptLabel: "1", v1alpha1.ManagerIDLabel: "manager-b",
	}}}
	if err := h.workers.Conns["w1"].API.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	// Their Job has no manager Job here: the reconcile of its key deletes
	// nothing.
	if _, err := h.r.Reconcile(ctx, reconcile.Request{NamespacedName: trainKey}); err != nil {
		t.Fatal(err)
	}
	if m := h.mirror(t, "w1"); m == nil || m.Labels[v1alpha1.ManagerIDLabel] != "manager-b" {
		t.Fatalf("the other installation's mirror was deleted with a manager Job this manager does not have")
	}
	// This manager's Job of the same name, placed on w1, is not given their
	// mirror's place: placed on w2, theirs left.
	h.create(t, policytest.Job())
	for range 3 {
		h.reconcile(t)
	}
	if m := h.mirror(t, "w1"); m == nil || m.Labels[v1alpha1.ManagerIDLabel] != "manager-b" {
		t.Errorf("the other installation's mirror was fenced")
	}
	if m := h.mirror(t, "w2"); m == nil || m.Labels[v1alpha1.ManagerIDLabel] != "manager-a" {
		t.Errorf("this manager's Job has no mirror of its own on w2: %v", m)
	}
	if got := strings.Join(h.events(), ","); got != policy.ReasonNameConflict+","+policy.ReasonDispatched {
		t.Errorf("events %s, want %s then %s", got, policy.ReasonNameConflict, policy.ReasonDispatched)
	}
}
