//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// waitEvent waits for an Event on the named Job whose reason is reason and
// whose message contains every one of parts, and returns it.
func waitEvent(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, job, reason string, timeout time.Duration, parts ...string) corev1.Event {
	t.Helper()
	var found corev1.Event
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && containsAll(e.Message, parts...) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on Job %s/%s mentioning %q: %v; Events seen: %q", reason, ns, job, parts, err, seen)
	}
	return found
}

// waitExists waits until the Job exists (a mirror appearing on a worker).
func waitExists(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string, timeout time.Duration) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		job, err = c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("Job %s/%s never appeared: %v", ns, name, err)
	}
	return job
}

// mergePatchJob merge-patches a Job.
func mergePatchJob(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, patch string) {
	t.Helper()
	if _, err := c.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching Job %s/%s with %s: %v", ns, name, patch, err)
	}
}

// suspendedCondition returns the Job's Suspended condition, if any.
func suspendedCondition(job *batchv1.Job) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == batchv1.JobSuspended {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// kubectlStatus is the STATUS column `kubectl get job` prints for the Job
// (the API server's table), read with the real kubectl.
func kubectlStatus(ctx context.Context, t *testing.T, kubeconfig, ns, name string) string {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig,
		"get", "job", name, "-n", ns, "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get job: %v: %s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		t.Fatalf("kubectl get job printed %q", out)
	}
	return fields[1]
}

// refuseOnWorker makes the worker's API server refuse requests in namespace
// ns that the CEL expression valid rejects, with message, through a
// ValidatingAdmissionPolicy: a worker-side rule the manager cannot know of,
// as a platform team's own policies would be. It returns once probe (a
// dry-run request) is refused, and removes the policy when the test ends.
func refuseOnWorker(ctx context.Context, t *testing.T, worker kubernetes.Interface, ns string, ops []admissionregistrationv1.OperationType, valid, message string, probe func(context.Context) error) {
	t.Helper()
	name := "e2e-refuse-" + ns + fmt.Sprint(len(ops))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"},
				}},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: valid, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	if _, err := worker.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = worker.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = worker.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = probe(ctx)
		return last != nil && strings.Contains(last.Error(), message), nil
	})
	if err != nil {
		t.Fatalf("the worker's policy never took effect: %v (last probe: %v)", err, last)
	}
}
