package chaos

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// recorder records every change of the manager's Jobs (in the run's
// namespaces) and WorkerClusters, and of every mirror and mirror pod on
// every worker, into a History, from watches that outlive the faults (an
// informer lists again after its API server comes back).
type recorder struct {
	history *History
	now     func() time.Time
	stop    chan struct{}
	synced  []toolscache.InformerSynced
}

func newRecorder(history *History) *recorder {
	return &recorder{history: history, now: time.Now, stop: make(chan struct{})}
}

// watchManager records the manager Jobs of namespace and the WorkerClusters.
func (r *recorder) watchManager(config *rest.Config, namespace string) error {
	c, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(namespace))
	if err := r.record(factory.Batch().V1().Jobs().Informer(), ManagerCluster, KindJob); err != nil {
		return err
	}
	factory.Start(r.stop)

	dc, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	workers := dyn.ForResource(v1alpha1.GroupVersion.WithResource("workerclusters")).Informer()
	if err := r.record(workers, ManagerCluster, KindWorker); err != nil {
		return err
	}
	dyn.Start(r.stop)
	return nil
}

// watchKueue records the Workloads of namespace (Kueue mode).
func (r *recorder) watchKueue(config *rest.Config, namespace string) error {
	dc, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, namespace, nil)
	workloads := dyn.ForResource(kueue.GroupVersion.WithResource("workloads")).Informer()
	if err := r.record(workloads, ManagerCluster, KindWorkload); err != nil {
		return err
	}
	dyn.Start(r.stop)
	return nil
}

// watchWorker records a worker's mirrors (Jobs with jobferry's origin
// label, in any namespace) and the pods of any Job.
func (r *recorder) watchWorker(config *rest.Config, worker string) error {
	c, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	mirrors := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.OriginLabel
	}))
	if err := r.record(mirrors.Batch().V1().Jobs().Informer(), worker, KindJob); err != nil {
		return err
	}
	mirrors.Start(r.stop)
	pods := informers.NewSharedInformerFactoryWithOptions(c, 0)
	if err := r.record(pods.Core().V1().Pods().Informer(), worker, KindPod); err != nil {
		return err
	}
	pods.Start(r.stop)
	return nil
}

func (r *recorder) record(informer toolscache.SharedIndexInformer, cluster string, kind Kind) error {
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.observe(cluster, kind, obj, false, false) },
		UpdateFunc: func(old, obj any) {
			if o, n := old.(metav1.Object), obj.(metav1.Object); o.GetResourceVersion() == n.GetResourceVersion() {
				return // a relist's replay, not a change
			}
			r.observe(cluster, kind, obj, false, false)
		},
		DeleteFunc: func(obj any) {
			tomb, unseen := obj.(toolscache.DeletedFinalStateUnknown)
			if unseen {
				obj = tomb.Obj
			}
			r.observe(cluster, kind, obj, true, unseen)
		},
	})
	r.synced = append(r.synced, informer.HasSynced)
	return err
}

func (r *recorder) observe(cluster string, kind Kind, obj any, deleted, unseen bool) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c := Change{At: r.now(), Cluster: cluster, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID(), Deleted: deleted, Unseen: unseen}
	switch kind {
	case KindJob:
		c.Job = JobFactsOf(obj.(*batchv1.Job))
	case KindPod:
		if c.Pod = PodFactsOf(obj.(*corev1.Pod)); c.Pod == nil {
			return
		}
	case KindWorker:
		wc := &v1alpha1.WorkerCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, wc); err != nil {
			return
		}
		c.Worker = WorkerFactsOf(wc)
	case KindWorkload:
		wl := &kueue.Workload{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, wl); err != nil {
			return
		}
		c.Workload = WorkloadFactsOf(wl)
	}
	r.history.Add(c)
}

// waitSynced returns once every watch has listed once.
func (r *recorder) waitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return fmt.Errorf("the history's watches did not list within a minute")
	}
	return nil
}

func (r *recorder) close() { close(r.stop) }
