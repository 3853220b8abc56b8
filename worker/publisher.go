package worker

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The rights the publisher needs, for the worker chart (hack/generate.sh
// writes them with controller-gen into charts/jobferry-worker/files/).
// +kubebuilder:rbac:groups="",resources=nodes;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobferry.dev,resources=clustercapacities,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=jobferry.dev,resources=clustercapacities/status,verbs=update

// Publisher keeps the ClusterCapacity singleton in step with the cluster's
// nodes and pods: it writes only when the summary changed or the heartbeat is
// due, and at most once per MinInterval however busy the cluster is.
type Publisher struct {
	Client    client.Client
	PoolLabel string
	// MinInterval is the least time between two writes.
	MinInterval time.Duration
	// Heartbeat is how often an unchanged summary is written again, so the
	// manager can tell a live publisher from a stale summary.
	Heartbeat time.Duration
	Clock     clock.Clock

	lastWrite time.Time
}

var singleton = types.NamespacedName{Name: v1alpha1.ClusterCapacityName}

// SetupWithManager registers the publisher; any node or pod change, and any
// change to the ClusterCapacity object itself, asks for a new summary.
func (p *Publisher) SetupWithManager(mgr ctrl.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: singleton}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("capacity-publisher").
		For(&v1alpha1.ClusterCapacity{}).
		Watches(&corev1.Node{}, toSingleton).
		Watches(&corev1.Pod{}, toSingleton).
		// One summary at a time: lastWrite is not shared between reconciles.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(p)
}

// Reconcile writes a fresh summary when it changed or the heartbeat is due.
func (p *Publisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if wait := p.MinInterval - p.Clock.Since(p.lastWrite); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var nodes corev1.NodeList
	if err := p.Client.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	pools := Summarize(nodes.Items, pods.Items, p.PoolLabel)

	cc := &v1alpha1.ClusterCapacity{}
	err := p.Client.Get(ctx, singleton, cc)
	if apierrors.IsNotFound(err) {
		cc = &v1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: singleton.Name}, Spec: v1alpha1.ClusterCapacitySpec{PoolLabel: p.PoolLabel}}
		if err := p.Client.Create(ctx, cc); err != nil {
			return reconcile.Result{}, fmt.Errorf("creating ClusterCapacity: %w", err)
		}
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading ClusterCapacity: %w", err)
	}
	now := p.Clock.Now()
	if hb := cc.Status.HeartbeatTime; hb != nil && equality.Semantic.DeepEqual(cc.Status.Pools, pools) {
		if due := p.Heartbeat - now.Sub(hb.Time); due > 0 {
			return reconcile.Result{RequeueAfter: due}, nil
		}
	}
	cc.Spec.PoolLabel = p.PoolLabel
	cc.Status.Pools = pools
	cc.Status.HeartbeatTime = &metav1.Time{Time: now}
	if err := p.Client.Status().Update(ctx, cc); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing ClusterCapacity status: %w", err)
	}
	p.lastWrite = now
	return reconcile.Result{RequeueAfter: p.Heartbeat}, nil
}

// CacheOptions keeps only what the summary and the Job controller need of
// each pod (metadata, resources, phase, conditions, container terminations
// and restarts), so a worker with many pods costs little memory.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: trimPod},
	}}
}

func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: *pod.ObjectMeta.DeepCopy(),
		Spec: corev1.PodSpec{
			NodeName:  pod.Spec.NodeName,
			Overhead:  pod.Spec.Overhead,
			Resources: pod.Spec.Resources,
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			Conditions:            pod.Status.Conditions,
			ContainerStatuses:     trimContainerStatuses(pod.Status.ContainerStatuses),
			InitContainerStatuses: trimContainerStatuses(pod.Status.InitContainerStatuses),
		},
	}
	trimmed.ManagedFields = nil
	for _, c := range pod.Spec.Containers {
		trimmed.Spec.Containers = append(trimmed.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.InitContainers {
		trimmed.Spec.InitContainers = append(trimmed.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return trimmed, nil
}

func trimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, cs := range in {
		out = append(out, corev1.ContainerStatus{
			Name: cs.Name, RestartCount: cs.RestartCount,
			State: corev1.ContainerState{Terminated: cs.State.Terminated},
		})
	}
	return out
}
