//go:build integration

package queue

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// On a real API server with Kueue's Workload CRD: SetCheck writes only
// jobferry's entry of status.admissionChecks, and only on the Workload as
// read: once another writer (Kueue evicting it, resetting the checks to
// Pending) changed it, the write is refused as a Conflict and the other
// writer's state stands.
func TestIntegrationSetCheckOnlyOnTheWorkloadAsRead(t *testing.T) {
	env := &envtest.Environment{
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths: []string{filepath.Join("..", "..", "bin", "kueue-files", "kueue.x-k8s.io_workloads.yaml")},
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg := testenv.Start(t, env)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job-train-1"},
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
		}}}}},
	}
	if err := c.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	// Kueue lists the ClusterQueue's checks, jobferry's among them.
	now := metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{
		{Name: "jobferry", State: kueue.CheckStatePending, LastTransitionTime: now},
		{Name: "other", State: kueue.CheckStatePending, LastTransitionTime: now, Message: "another controller's"},
	}
	if err := c.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{"jobferry": true}
	read := func() (*kueue.Workload, workload.View) {
		t.Helper()
		var got kueue.Workload
		if err := c.Get(ctx, client.ObjectKeyFromObject(wl), &got); err != nil {
			t.Fatal(err)
		}
		return &got, workload.ViewOf("team", &got, ours)
	}
	q := &Queue{Client: c, Clock: clocktesting.NewFakeClock(now.Time)}

	_, v := read()
	if err := q.SetCheck(ctx, "default", v, workload.CheckUpdate{State: kueue.CheckStateReady, Message: "placed on worker cluster w1"}); err != nil {
		t.Fatalf("setting the check on the Workload as read: %v", err)
	}
	got, after := read()
	if after.State != kueue.CheckStateReady {
		t.Errorf("check %s after the write, want Ready", after.State)
	}
	if other := got.Status.AdmissionChecks[1]; other.Name != "other" || other.State != kueue.CheckStatePending || other.Message != "another controller's" {
		t.Errorf("the other check became %+v", other)
	}

	// Kueue evicts the Workload: every check Pending again.
	got.Status.AdmissionChecks[0].State, got.Status.AdmissionChecks[0].Message = kueue.CheckStatePending, "Reset to Pending after eviction. Previously: Ready"
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	// jobferry, deciding on the Workload as it read it before: refused.
	err = q.SetCheck(ctx, "default", after, workload.CheckUpdate{State: kueue.CheckStateRetry, Message: "the worker was lost"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("a check written on a Workload changed since it was read: %v, want a Conflict", err)
	}
	t.Logf("refused: %v", err)
	if _, now := read(); now.State != kueue.CheckStatePending || now.Message != "Reset to Pending after eviction. Previously: Ready" {
		t.Errorf("the check became %s (%q), want Kueue's Pending kept", now.State, now.Message)
	}
}
