package devenv

import (
	"context"
	"fmt"
	"os"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Register tells the manager about a worker: a Secret holding its kubeconfig
// and a WorkerCluster pointing at it.
func Register(ctx context.Context, c client.Client, worker, kubeconfigPath string, jobController v1alpha1.JobControllerMode) error {
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: worker + "-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating the kubeconfig Secret of %s: %w", worker, err)
	}
	wc := &v1alpha1.WorkerCluster{
		ObjectMeta: metav1.ObjectMeta{Name: worker},
		Spec: v1alpha1.WorkerClusterSpec{
			KubeConfig:    v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: secret.Name}},
			JobController: jobController,
		},
	}
	if err := c.Create(ctx, wc); err != nil {
		return fmt.Errorf("creating WorkerCluster %s: %w", worker, err)
	}
	return nil
}

// WaitConnected waits until want WorkerClusters are Connected and show a
// capacity summary, so the first Jobs can be placed on any of them.
func WaitConnected(ctx context.Context, c client.Client, want int, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var list v1alpha1.WorkerClusterList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		connected := 0
		last = ""
		for _, wc := range list.Items {
			cond := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected)
			switch {
			case cond != nil && cond.Status == metav1.ConditionTrue && wc.Status.Capacity != nil:
				connected++
			case cond != nil && cond.Status == metav1.ConditionTrue:
				last += fmt.Sprintf(" %s: no capacity summary yet;", wc.Name)
			case cond != nil:
				last += fmt.Sprintf(" %s: %s (%s);", wc.Name, cond.Reason, cond.Message)
			}
		}
		return connected >= want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d connected workers: %w;%s", want, err, last)
	}
	return nil
}

// BindRole gives user the rules in ns (a Role and a RoleBinding named
// name) and returns once the authorizer allows the first of them.
func BindRole(ctx context.Context, c kubernetes.Interface, ns, user, name string, rules ...rbacv1.PolicyRule) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Role %s/%s: %w", ns, name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating RoleBinding %s/%s: %w", ns, name, err)
	}
	// The authorizer sees the binding a moment later.
	rule := rules[0]
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0]},
		}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed, err
	})
	if err != nil {
		return fmt.Errorf("%s's rights in %s never took effect: %w", user, ns, err)
	}
	return nil
}
