//go:build integration

package admission

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The dry-run policy on a real kube-apiserver: the manager's identity, with
// every right, creates a pod only as a dry-run (which admission judges and
// nothing stores); a real creation is refused with the policy's message;
// anyone else's pods pass.
func TestIntegrationDryRunPodsPolicy(t *testing.T) {
	ctx := context.Background()
	const managerUser = "system:serviceaccount:jobferry-system:jobferry-manager"
	policy, binding := DryRunPodsPolicy("jobferry-dry-run-pods", managerUser)
	admin, as := startWithPolicy(t, policy, binding)
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "train-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	}
	manager := as(managerUser)
	// The policy is enforced once the API server has loaded it: a real
	// creation may pass while it has not, so the first refusal is waited for.
	var err error
	if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var created *corev1.Pod
		if created, err = manager.CoreV1().Pods("default").Create(ctx, pod(), metav1.CreateOptions{}); err == nil {
			return false, admin.CoreV1().Pods("default").Delete(ctx, created.Name, metav1.DeleteOptions{})
		}
		return true, nil
	}); pollErr != nil {
		t.Fatalf("the manager's pods are still created for real: %v", pollErr)
	}
	refusedAsForbidden(t, err, "jobferry's manager may create pods only as a server-side dry-run")
	// The policy in force, a dry-run still passes.
	if _, err := manager.CoreV1().Pods("default").Create(ctx, pod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the manager's dry-run was refused: %v", err)
	}
	pods, lerr := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if n := len(pods.Items); n != 0 {
		t.Errorf("%d pods stored, want none", n)
	}
	if _, err := as("alice").CoreV1().Pods("default").Create(ctx, pod(), metav1.CreateOptions{}); err != nil {
		t.Errorf("another user's pod was refused: %v", err)
	}
}
