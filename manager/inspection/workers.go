package inspection

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
	"github.com/jobferry/jobferry/manager/inspection/workerread"
)

// workerClients reach a worker with the manager's credential for it, on
// every replica (the leader's pool of connections lives on the leader
// only): the kubeconfig in the Secret its WorkerCluster names, read from the
// manager's cache. A client is built per request; client-go shares the TLS
// transports of equal configurations, so no connection is opened anew, and
// a renewed token is used as soon as the Secret shows it. The requests of
// all of them to one worker share one rate limiter: however many callers
// inspect, the inspection asks no more of a worker than qps and burst from
// each replica (the APIService spreads requests over every replica).
type workerClients struct {
	reader    client.Reader
	namespace string
	qps       float32
	burst     int
	mu        sync.Mutex
	limiters  map[string]flowcontrol.RateLimiter
}

func newWorkerClients(reader client.Reader, namespace string, qps float32, burst int) *workerClients {
	return &workerClients{reader: reader, namespace: namespace, qps: qps, burst: burst, limiters: map[string]flowcontrol.RateLimiter{}}
}

// unreachable is a worker the manager cannot read now: said in the
// inspection's notes, not an error of the request.
type unreachable struct{ error }

func (w *workerClients) client(ctx context.Context, worker string) (*workerread.Reader, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := w.reader.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unreachable{fmt.Errorf("worker %s is not a WorkerCluster of this manager any more", worker)}
		}
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	ref := wc.Spec.KubeConfig.SecretRef
	data, refused := workerkubeconfig.FromSecret(ctx, w.reader, w.namespace, wc)
	switch {
	case refused == nil:
	case refused.Reason == v1alpha1.ReasonSecretUnreadable:
		return nil, fmt.Errorf("the kubeconfig of worker %s: %w", worker, refused)
	default:
		return nil, unreachable{fmt.Errorf("the kubeconfig of worker %s: %w", worker, refused)}
	}
	cfg, err := workerkubeconfig.RESTConfig(data)
	if err != nil {
		return nil, unreachable{fmt.Errorf("the kubeconfig of worker %s (Secret %s/%s): %w", worker, w.namespace, ref.Name, err)}
	}
	cfg.RateLimiter = w.limiter(worker)
	cfg.UserAgent = "jobferry-manager/inspection"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return workerread.New(kube), nil
}

// limiter is the worker's one rate limiter (WorkerClusters are few, and
// the manager's administrators' to make).
func (w *workerClients) limiter(worker string) flowcontrol.RateLimiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.limiters[worker]
	if !ok {
		l = flowcontrol.NewTokenBucketRateLimiter(w.qps, w.burst)
		w.limiters[worker] = l
	}
	return l
}
