//go:build integration

package admission

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The worker's namespace policy on a real kube-apiserver: the manager's
// identity (with every right here, as system:masters) creates namespaces
// only as jobferry makes them and changes only the Pod Security labels of
// those; every refusal says what it refused; other users are not affected.
func TestIntegrationNamespacePolicy(t *testing.T) {
	const psaEnforce = "pod-security.kubernetes.io/enforce"
	ctx := context.Background()
	const managerUser = "system:serviceaccount:jobferry-system:jobferry-manager"
	policy, binding := NamespacePolicy("jobferry-manager-namespaces", managerUser, "")
	admin, as := startWithPolicy(t, policy, binding)
	// A second manager's identity, under a policy pinned to its ID (m2).
	const pinnedUser = "system:serviceaccount:jobferry-other:jobferry-manager"
	pinnedPolicy, pinnedBinding := NamespacePolicy("jobferry-other-namespaces", pinnedUser, "m2")
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pinnedPolicy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the pinned policy: %v", err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, pinnedBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manager, pinned, alice := as(managerUser), as(pinnedUser), as("alice")
	namespace := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	labelPatch := func(labels map[string]any) []byte {
		parts := []string{}
		for k, v := range labels {
			value := "null"
			if v != nil {
				value = fmt.Sprintf("%q", v)
			}
			parts = append(parts, fmt.Sprintf("%q:%s", k, value))
		}
		return []byte(`{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`)
	}
	relabel := func(c kubernetes.Interface, name string, labels map[string]any) error {
		_, err := c.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, labelPatch(labels), metav1.PatchOptions{})
		return err
	}
	ours := map[string]string{v1alpha1.ManagerIDLabel: "m1", psaEnforce: "baseline"}
	// The policies take effect once the API server has loaded them.
	for _, c := range []kubernetes.Interface{manager, pinned} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := relabel(c, "default", map[string]any{psaEnforce: "privileged"})
			return apierrors.IsForbidden(err), nil
		}); err != nil {
			t.Fatalf("the policy never took effect: %v", err)
		}
	}

	t.Run("creates a namespace as jobferry makes one", func(t *testing.T) {
		if _, err := manager.CoreV1().Namespaces().Create(ctx, namespace("team-a", ours), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("creates no namespace without its ID", func(t *testing.T) {
		_, err := manager.CoreV1().Namespaces().Create(ctx, namespace("unmarked", map[string]string{psaEnforce: "baseline"}), metav1.CreateOptions{})
		refusedAsForbidden(t, err, "may create a namespace only labelled jobferry.dev/manager-id", "namespace unmarked is not so")
	})
	t.Run("creates no namespace with other labels", func(t *testing.T) {
		_, err := manager.CoreV1().Namespaces().Create(ctx, namespace("labelled", map[string]string{v1alpha1.ManagerIDLabel: "m1", "team": "x"}), metav1.CreateOptions{})
		refusedAsForbidden(t, err, "namespace labelled has labels team")
	})
	t.Run("creates no namespace with annotations", func(t *testing.T) {
		ns := namespace("annotated", ours)
		ns.Annotations = map[string]string{"scheduler.alpha.kubernetes.io/node-selector": "pool=gpu"}
		_, err := manager.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		refusedAsForbidden(t, err, "no annotations, finalizers or owners", "namespace annotated is not so")
	})
	t.Run("relabels one it created", func(t *testing.T) {
		if err := relabel(manager, "team-a", map[string]any{psaEnforce: "restricted", "pod-security.kubernetes.io/warn": "restricted"}); err != nil {
			t.Fatal(err)
		}
		if err := relabel(manager, "team-a", map[string]any{"pod-security.kubernetes.io/warn": nil}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("changes no other label of one it created", func(t *testing.T) {
		refusedAsForbidden(t, relabel(manager, "team-a", map[string]any{"team": "x"}), "may change only the Pod Security labels", "namespace team-a changes labels team")
		refusedAsForbidden(t, relabel(manager, "team-a", map[string]any{v1alpha1.ManagerIDLabel: nil}), "changes labels jobferry.dev/manager-id")
	})
	t.Run("changes no annotation of one it created", func(t *testing.T) {
		_, err := manager.CoreV1().Namespaces().Patch(ctx, "team-a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
		refusedAsForbidden(t, err, "changes its annotations, finalizers or owners")
	})
	t.Run("changes no namespace it did not create", func(t *testing.T) {
		refusedAsForbidden(t, relabel(manager, "kube-system", map[string]any{psaEnforce: "privileged"}), "may change only the namespaces it created", "namespace kube-system is not one")
		refusedAsForbidden(t, relabel(manager, "default", map[string]any{v1alpha1.ManagerIDLabel: "m1"}), "namespace default is not one")
	})
	t.Run("pinned: creates and relabels only its own manager's namespaces", func(t *testing.T) {
		theirs := map[string]string{v1alpha1.ManagerIDLabel: "m2", psaEnforce: "baseline"}
		if _, err := pinned.CoreV1().Namespaces().Create(ctx, namespace("team-m2", theirs), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := relabel(pinned, "team-m2", map[string]any{psaEnforce: "restricted"}); err != nil {
			t.Fatal(err)
		}
		_, err := pinned.CoreV1().Namespaces().Create(ctx, namespace("team-m1-by-m2", ours), metav1.CreateOptions{})
		refusedAsForbidden(t, err, "may create a namespace only labelled jobferry.dev/manager-id (its own)", "namespace team-m1-by-m2 is not so")
		// team-a is the unpinned manager's (m1): the pinned one may not
		// weaken its Pod Security level, though the unpinned one may
		// relabel m2's (it is pinned to no ID).
		refusedAsForbidden(t, relabel(pinned, "team-a", map[string]any{psaEnforce: "privileged"}),
			"may change only the namespaces it created (labelled jobferry.dev/manager-id=m2)", "namespace team-a is not one")
		if err := relabel(manager, "team-m2", map[string]any{psaEnforce: "baseline"}); err != nil {
			t.Errorf("the unpinned manager relabelling a namespace of another ID: %v", err)
		}
	})
	t.Run("deletes only a namespace it created", func(t *testing.T) {
		del := func(c kubernetes.Interface, name string) error {
			return c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		}
		if _, err := manager.CoreV1().Namespaces().Create(ctx, namespace("team-gone", ours), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := del(manager, "team-gone"); err != nil {
			t.Fatalf("the manager deleting a namespace it created: %v", err)
		}
		if _, err := alice.CoreV1().Namespaces().Create(ctx, namespace("alices-own", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(manager, "alices-own"), "may delete only the namespaces it created", "namespace alices-own is not one")
		// kube-system and default the API server itself keeps; labelled as
		// jobferry's by an administrator, any kube-* namespace stays out
		// of reach all the same.
		if _, err := admin.CoreV1().Namespaces().Create(ctx, namespace("kube-labelled", ours), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(manager, "kube-labelled"), "never kube-*, default or its own", "namespace kube-labelled is not one")
		// Marked by someone else besides (another manager accepted there):
		// not jobferry's alone.
		marked := namespace("team-marked", maps.Clone(ours))
		marked.Labels["accepts-manager.jobferry.dev/m2"] = "true"
		if _, err := admin.CoreV1().Namespaces().Create(ctx, marked, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(manager, "team-marked"), "namespace team-marked is not one: it has labels accepts-manager.jobferry.dev/m2")
		// Owned by something else: not jobferry's alone either.
		ownedNS := namespace("team-owned", maps.Clone(ours))
		ownedNS.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a-tool", UID: "0f2c6c2e-0000-4000-8000-000000000001"}}
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ownedNS, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(manager, "team-owned"), "no finalizers or owners", "namespace team-owned is not one")
		// The namespace of the manager's own identity, labelled as
		// jobferry's by an administrator: kept.
		own := namespace("jobferry-system", ours)
		if _, err := admin.CoreV1().Namespaces().Create(ctx, own, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(manager, "jobferry-system"), "namespace jobferry-system is not one")
		// Pinned to m2, the other manager may not delete m1's.
		if _, err := manager.CoreV1().Namespaces().Create(ctx, namespace("team-m1-kept", ours), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refusedAsForbidden(t, del(pinned, "team-m1-kept"), "may delete only the namespaces it created (labelled jobferry.dev/manager-id=m2,", "namespace team-m1-kept is not one")
		theirs := map[string]string{v1alpha1.ManagerIDLabel: "m2"}
		if _, err := pinned.CoreV1().Namespaces().Create(ctx, namespace("team-m2-gone", theirs), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := del(pinned, "team-m2-gone"); err != nil {
			t.Errorf("the pinned manager deleting a namespace of its own ID: %v", err)
		}
		if err := del(alice, "alices-own"); err != nil {
			t.Errorf("another user deleting a namespace: %v", err)
		}
	})
	t.Run("other users are not affected", func(t *testing.T) {
		if _, err := alice.CoreV1().Namespaces().Create(ctx, namespace("alices", map[string]string{"team": "x"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := relabel(alice, "team-a", map[string]any{"team": "x"}); err != nil {
			t.Fatal(err)
		}
	})
	got, err := admin.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[psaEnforce] != "restricted" || got.Labels[v1alpha1.ManagerIDLabel] != "m1" {
		t.Errorf("namespace team-a labels %v, want enforce restricted and the manager's ID", got.Labels)
	}
}
