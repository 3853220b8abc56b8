package inspection

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
)

// workerClients reach a worker with the manager's credential for it, on
// every replica (the leader's pool of connections lives on the leader
// only): the kubeconfig in the Secret its WorkerCluster names, read from the
// manager's cache. A client is built per request; client-go shares the TLS
// transports of equal configurations, so no connection is opened anew, and
// a renewed token is used as soon as the Secret shows it.
type workerClients struct {
	reader    client.Reader
	namespace string
	qps       float32
	burst     int
}

// unreachable is a worker the manager cannot read now: said in the
// inspection's notes, not an error of the request.
type unreachable struct{ error }

func (w workerClients) client(ctx context.Context, worker string) (kubernetes.Interface, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := w.reader.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unreachable{fmt.Errorf("worker %s is not a WorkerCluster of this manager any more", worker)}
		}
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	ref := wc.Spec.KubeConfig.SecretRef
	secret := &corev1.Secret{}
	if err := w.reader.Get(ctx, types.NamespacedName{Namespace: w.namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unreachable{fmt.Errorf("the kubeconfig Secret %s/%s of worker %s is missing", w.namespace, ref.Name, worker)}
		}
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s of worker %s: %w", w.namespace, ref.Name, worker, err)
	}
	cfg, err := workerkubeconfig.RESTConfig(secret.Data[ref.KeyOrDefault()])
	if err != nil {
		return nil, unreachable{fmt.Errorf("the kubeconfig of worker %s (Secret %s/%s): %w", worker, w.namespace, ref.Name, err)}
	}
	cfg.QPS, cfg.Burst = w.qps, w.burst
	cfg.UserAgent = "jobferry-manager/inspection"
	return kubernetes.NewForConfig(cfg)
}
