//go:build integration

package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// The state policy on a real kube-apiserver: a tenant (any user but the
// manager's) can set no jobferry state on a Job, at creation or update,
// and the refusal names the key; the user inputs, the opt-in webhook's
// held-for-placement and every other change of a Job pass; the manager's
// identity writes its state.
func TestIntegrationStatePolicy(t *testing.T) {
	ctx := context.Background()
	const managerUser = "system:serviceaccount:jobferry-system:jobferry-manager"
	policy, binding := StatePolicy("jobferry-state", managerUser)
	admin, as := startWithPolicy(t, policy, binding)
	// alice has every right (system:masters): only the policy stands in her way.
	alice, manager := as("alice"), as(managerUser)
	job := func(name string, annotations, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations, Labels: labels},
			Spec: batchv1.JobSpec{
				ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}},
			},
		}
	}
	refused := func(t *testing.T, err error, parts ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("accepted; want it refused saying %q", parts)
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("refused as %v, want Forbidden or Invalid", apierrors.ReasonForError(err))
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("refusal %q does not say %q", err, p)
			}
		}
		t.Logf("refused: %v", err)
	}
	// The policy takes effect once the API server has loaded it.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		_, err := alice.BatchV1().Jobs("default").Create(ctx, job(fmt.Sprintf("probe-%d", i), map[string]string{v1alpha1.WorkerAnnotation: "w1"}, nil), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil {
			t.Fatalf("probing the policy: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("creation", func(t *testing.T) {
		for name, tc := range map[string]struct {
			annotations, labels map[string]string
			want                []string
		}{
			"a placement":         {annotations: map[string]string{v1alpha1.WorkerAnnotation: "w1"}, want: []string{"annotation jobferry.dev/worker of a Job: jobferry's own state"}},
			"an attempt and seal": {annotations: map[string]string{v1alpha1.DispatchAttemptAnnotation: "7", v1alpha1.StateSealAnnotation: "v1.x"}, want: []string{"annotations ", "jobferry.dev/dispatch-attempt", "jobferry.dev/state-seal"}},
			"held, but not true":  {annotations: map[string]string{v1alpha1.HeldForPlacementAnnotation: "yes"}, want: []string{"jobferry.dev/held-for-placement"}},
			"a mirror label":      {labels: map[string]string{v1alpha1.OriginUIDLabel: "x"}, want: []string{"label jobferry.dev/origin-uid"}},
			"the worker label":    {labels: map[string]string{v1alpha1.WorkerLabel: "worker-2"}, want: []string{"label jobferry.dev/worker"}},
			// The API server validates an annotation key in lowercase.
			"a placement in capitals": {annotations: map[string]string{"Jobferry.dev/worker": "w1"}, want: []string{"annotation Jobferry.dev/worker of a Job: jobferry's own state"}},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := alice.BatchV1().Jobs("default").Create(ctx, job("forged", tc.annotations, tc.labels), metav1.CreateOptions{})
				refused(t, err, tc.want...)
			})
		}
		t.Run("managedBy of the worker side", func(t *testing.T) {
			j := job("worker-managed", nil, nil)
			j.Spec.ManagedBy = ptr.To(v1alpha1.WorkerManagedBy)
			_, err := alice.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{})
			refused(t, err, `spec.managedBy "jobferry.dev/worker" names no controller of this cluster`, `use "jobferry.dev/manager"`)
		})
	})

	// What tenants may write goes through.
	inputs := map[string]string{
		v1alpha1.ClusterSelectorAnnotation: "zone=a", v1alpha1.OnWorkerLostAnnotation: v1alpha1.OnWorkerLostWait,
		v1alpha1.HeldForPlacementAnnotation: "true", "example.com/team": "a",
	}
	created, err := alice.BatchV1().Jobs("default").Create(ctx, job("allowed", inputs, map[string]string{"team": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a Job with the user inputs and held-for-placement was refused: %v", err)
	}
	// The manager writes its state.
	created.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	created.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	if _, err := manager.BatchV1().Jobs("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the manager's identity may not write its state: %v", err)
	}
	latest := func(t *testing.T) *batchv1.Job {
		t.Helper()
		j, err := admin.BatchV1().Jobs("default").Get(ctx, "allowed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	t.Run("update", func(t *testing.T) {
		for name, change := range map[string]func(*batchv1.Job){
			"moving the placement":   func(j *batchv1.Job) { j.Annotations[v1alpha1.WorkerAnnotation] = "w2" },
			"raising the attempt":    func(j *batchv1.Job) { j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2" },
			"removing the placement": func(j *batchv1.Job) { delete(j.Annotations, v1alpha1.WorkerAnnotation) },
			"adding a mirror UID":    func(j *batchv1.Job) { j.Annotations[v1alpha1.MirrorUIDAnnotation] = "x" },
			"adding a label":         func(j *batchv1.Job) { j.Labels[v1alpha1.DispatchAttemptLabel] = "9" },
			// At creation only the webhook's value is let through.
			"re-holding it": func(j *batchv1.Job) { j.Annotations[v1alpha1.HeldForPlacementAnnotation] = "false" },
		} {
			t.Run(name, func(t *testing.T) {
				j := latest(t)
				change(j)
				_, err := alice.BatchV1().Jobs("default").Update(ctx, j, metav1.UpdateOptions{})
				refused(t, err, "only jobferry's manager may write")
			})
		}
		// The status subresource writes labels and annotations too (the
		// Job status strategy keeps only the spec): a controller with
		// jobs/status rights is held like anyone else.
		t.Run("through the status subresource", func(t *testing.T) {
			j := latest(t)
			j.Annotations[v1alpha1.DispatchAttemptAnnotation] = "5"
			_, err := alice.BatchV1().Jobs("default").UpdateStatus(ctx, j, metav1.UpdateOptions{})
			refused(t, err, "annotation jobferry.dev/dispatch-attempt of a Job", "only jobferry's manager may write")
		})
		t.Run("anything else", func(t *testing.T) {
			j := latest(t)
			j.Annotations[v1alpha1.ClusterSelectorAnnotation] = "zone=b"
			j.Annotations["example.com/note"] = "changed"
			j.Labels["team"] = "b"
			j.Spec.Parallelism = ptr.To[int32](2)
			if _, err := alice.BatchV1().Jobs("default").Update(ctx, j, metav1.UpdateOptions{}); err != nil {
				t.Errorf("a change that leaves jobferry's state alone was refused: %v", err)
			}
		})
	})
}

// refusedAsForbidden fails the test unless err is a Forbidden refusal
// that says every part.
func refusedAsForbidden(t *testing.T, err error, parts ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v; want it refused as Forbidden saying %q", err, parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("refusal %q does not say %q", err, p)
		}
	}
	t.Logf("refused: %v", err)
}

// startWithPolicy starts a kube-apiserver with policy and its binding in
// force, and returns its admin config and a client acting as user (with
// every right, as system:masters: only the policy stands in their way).
func startWithPolicy(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (admin kubernetes.Interface, as func(user string) kubernetes.Interface) {
	t.Helper()
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	admin = kubernetes.NewForConfigOrDie(cfg)
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the policy: %v", err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return admin, func(user string) kubernetes.Interface {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
		return kubernetes.NewForConfigOrDie(c)
	}
}
