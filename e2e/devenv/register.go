package devenv

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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
