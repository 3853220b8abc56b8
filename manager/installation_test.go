package manager

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestInstallationID(t *testing.T) {
	a := installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system")
	if a != installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system") || len(a) != 16 {
		t.Errorf("installationID = %q: want 16 hex characters, the same every time", a)
	}
	if a == installationID("5d6c2b1e-0000-4000-8000-000000000002", "jobferry-system") || a == installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-b") {
		t.Error("two installations share an id")
	}
}

func TestMayDelete(t *testing.T) {
	job := func(labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	ours := job(map[string]string{v1alpha1.ManagerIDLabel: "a"})
	theirs := job(map[string]string{v1alpha1.ManagerIDLabel: "b"})
	legacy := job(map[string]string{})
	for _, tc := range []struct {
		name   string
		m      *batchv1.Job
		shared bool
		want   bool
	}{
		{"ours", ours, false, true},
		{"ours, the origin shared", ours, true, true},
		{"another installation's", theirs, false, false},
		{"another installation's, the origin shared", theirs, true, false},
		{"unlabelled (an earlier manager's)", legacy, false, true},
		{"unlabelled, the origin shared: it may be theirs", legacy, true, false},
	} {
		if got := MayDelete(tc.m, "a", tc.shared); got != tc.want {
			t.Errorf("%s: mayDelete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOriginCondition(t *testing.T) {
	if c := originCondition("jobferry", nil); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonOriginExclusive {
		t.Errorf("no conflict: %+v", c)
	}
	c := originCondition("jobferry", &OriginConflict{Manager: "b", Job: types.NamespacedName{Namespace: "team-a", Name: "train"}})
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonOriginShared ||
		!strings.Contains(c.Message, `jobferry.dev/manager-id b) with the same origin "jobferry" made mirrors on this worker, such as team-a/train`) {
		t.Errorf("a conflict: %+v", c)
	}
}

// Two managers with one origin on one worker: the other's mirror of a Job
// of the same name is neither fenced nor deleted with this manager's Job,
// and this manager's Job goes elsewhere.
func TestAnotherInstallationsMirrorIsLeftAlone(t *testing.T) {
	h := newJobsHarness(t, "w1", "w2")
	h.r.ManagerID = "manager-a"
	ctx := context.Background()
	theirs := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", Labels: map[string]string{
		v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "their-job", v1alpha1.DispatchAttemptLabel: "1", v1alpha1.ManagerIDLabel: "manager-b",
	}}}
	if err := h.workers["w1"].API.Create(ctx, theirs); err != nil {
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
	h.create(t, stepJob())
	for range 3 {
		h.reconcile(t)
	}
	if m := h.mirror(t, "w1"); m == nil || m.Labels[v1alpha1.ManagerIDLabel] != "manager-b" {
		t.Errorf("the other installation's mirror was fenced")
	}
	if m := h.mirror(t, "w2"); m == nil || m.Labels[v1alpha1.ManagerIDLabel] != "manager-a" {
		t.Errorf("this manager's Job has no mirror of its own on w2: %v", m)
	}
	if got := strings.Join(h.events(), ","); got != ReasonNameConflict+","+ReasonDispatched {
		t.Errorf("events %s, want %s then %s", got, ReasonNameConflict, ReasonDispatched)
	}
}
