//go:build integration

package admission

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The worker's policy on the manager's Job writes, on a real
// kube-apiserver: the manager's identity (with every right here, as
// system:masters) writes Jobs only in namespaces jobferry created, whose
// administrator accepted a manager's Jobs or that the chart lists, never in
// kube-* or its own namespace; it deletes its mirrors wherever they are;
// every refusal says what it refused; other users are not affected.
func TestIntegrationManagerJobsPolicy(t *testing.T) {
	ctx := context.Background()
	const managerUser = "system:serviceaccount:jobferry-system:jobferry-manager"
	policy, binding := ManagerJobsPolicy("jobferry-manager-jobs", managerUser, "", "listed")
	admin, as := startWithPolicy(t, policy, binding)
	manager, alice := as(managerUser), as("alice")
	for name, labels := range map[string]map[string]string{
		"created":         {v1alpha1.ManagerIDLabel: "m1"},
		"accepted":        {v1alpha1.AcceptsManagerLabel("m1"): "true"},
		"listed":          nil,
		"another-team":    {"team": "b"},
		"not-accepting":   {v1alpha1.AcceptsManagerLabel("m1"): "false"},
		"jobferry-system": {v1alpha1.AcceptsManagerLabel("m1"): "true"},
		"kube-tenant":     {v1alpha1.AcceptsManagerLabel("m1"): "true"},
	} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	job := func(ns, name string, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}
	}
	create := func(as interface {
		Create(context.Context, *batchv1.Job, metav1.CreateOptions) (*batchv1.Job, error)
	}, j *batchv1.Job) error {
		_, err := as.Create(ctx, j, metav1.CreateOptions{})
		return err
	}
	// The policy takes effect once the API server has loaded it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := create(manager.BatchV1().Jobs("kube-system"), job("kube-system", "probe", nil))
		return apierrors.IsForbidden(err), nil
	}); err != nil {
		t.Fatalf("the policy never took effect: %v", err)
	}

	t.Run("writes Jobs where jobferry created the namespace, it was accepted or is listed", func(t *testing.T) {
		for _, ns := range []string{"created", "accepted", "listed"} {
			if err := create(manager.BatchV1().Jobs(ns), job(ns, "mirror", map[string]string{v1alpha1.ManagerIDLabel: "m1"})); err != nil {
				t.Fatalf("creating a mirror in %s: %v", ns, err)
			}
			if _, err := manager.BatchV1().Jobs(ns).Patch(ctx, "mirror", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("changing the mirror in %s: %v", ns, err)
			}
		}
	})
	t.Run("writes no Job in another team's namespace", func(t *testing.T) {
		for _, ns := range []string{"another-team", "not-accepting"} {
			refusedAsForbidden(t, create(manager.BatchV1().Jobs(ns), job(ns, "borrowed-sa", nil)),
				"may write Jobs only in the namespaces it created (labelled jobferry.dev/manager-id), that their administrator accepted its Jobs in (labelled accepts-manager.jobferry.dev/<its ID>=true) or that the worker chart lists",
				"namespace "+ns+" is none of them")
		}
	})
	t.Run("writes no Job in kube-* or its own namespace, accepted or not", func(t *testing.T) {
		for _, ns := range []string{"kube-system", "kube-tenant", "jobferry-system"} {
			refusedAsForbidden(t, create(manager.BatchV1().Jobs(ns), job(ns, "escalate", nil)),
				"may not write Jobs in namespace "+ns, "the kube-* namespaces and the namespace of its own identity are out of its reach")
		}
	})
	t.Run("deletes its mirror once the namespace's acceptance is withdrawn, nothing else", func(t *testing.T) {
		if _, err := admin.CoreV1().Namespaces().Patch(ctx, "accepted", types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.AcceptsManagerLabel("m1")+`":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := create(admin.BatchV1().Jobs("accepted"), job("accepted", "theirs", nil)); err != nil {
			t.Fatal(err)
		}
		// The policy reads the namespace from the API server's informer:
		// the withdrawal takes effect within moments.
		var err error
		if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err = manager.BatchV1().Jobs("accepted").Delete(ctx, "theirs", metav1.DeleteOptions{})
			return apierrors.IsForbidden(err), nil
		}); pollErr != nil {
			t.Fatalf("deleting someone else's Job in a namespace no longer accepted: %v", err)
		}
		refusedAsForbidden(t, err, "namespace accepted is none of them")
		if err := manager.BatchV1().Jobs("accepted").Delete(ctx, "mirror", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting its own mirror there: %v", err)
		}
	})
	t.Run("other users are not affected", func(t *testing.T) {
		if err := create(alice.BatchV1().Jobs("another-team"), job("another-team", "alices", nil)); err != nil {
			t.Fatal(err)
		}
	})
}

// Pinned to one manager (the worker chart's managerIdentity.managerID), the
// policy lets its token write only in that manager's namespaces and those
// accepted for it, not in another manager's.
func TestIntegrationManagerJobsPolicyPinnedToOneManager(t *testing.T) {
	ctx := context.Background()
	const managerUser = "system:serviceaccount:jobferry-system:jobferry-manager"
	policy, binding := ManagerJobsPolicy("jobferry-manager-jobs", managerUser, "m1")
	admin, as := startWithPolicy(t, policy, binding)
	manager := as(managerUser)
	for name, labels := range map[string]map[string]string{
		"created-by-m1": {v1alpha1.ManagerIDLabel: "m1"},
		"accepted-m1":   {v1alpha1.AcceptsManagerLabel("m1"): "true"},
		"created-by-m2": {v1alpha1.ManagerIDLabel: "m2"},
		"accepted-m2":   {v1alpha1.AcceptsManagerLabel("m2"): "true"},
	} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	job := func(ns string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirror", Labels: map[string]string{v1alpha1.ManagerIDLabel: "m1"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := manager.BatchV1().Jobs("created-by-m2").Create(ctx, job("created-by-m2"), metav1.CreateOptions{})
		return apierrors.IsForbidden(err), nil
	}); err != nil {
		t.Fatalf("the manager's token still writes in another manager's namespace: %v", err)
	}
	_, err := manager.BatchV1().Jobs("accepted-m2").Create(ctx, job("accepted-m2"), metav1.CreateOptions{})
	refusedAsForbidden(t, err, "namespace accepted-m2 is none of them")
	for _, ns := range []string{"created-by-m1", "accepted-m1"} {
		if _, err := manager.BatchV1().Jobs(ns).Create(ctx, job(ns), metav1.CreateOptions{}); err != nil {
			t.Errorf("creating its mirror in %s: %v", ns, err)
		}
	}
}
