package manager

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// remote is the manager's connection to one worker: a client whose reads come
// from a cache holding only this installation's mirrors and the worker's
// ClusterCapacity, so reconciles never spend API calls on reads.
type remote struct {
	name    string
	config  *rest.Config
	cluster cluster.Cluster
	health  kubernetes.Interface
	cancel  context.CancelFunc
	// kubeconfigHash identifies the Secret content the remote was built from,
	// so a rotated Secret rebuilds it and an unchanged one does not.
	kubeconfigHash string

	synced  atomic.Bool
	healthy atomic.Bool
	// failures counts consecutive failed health probes, for backoff.
	failures atomic.Int32
	lastErr  atomic.Value // string
	// rights is what the last review of the credential's rights found; nil
	// until the first one.
	rights atomic.Pointer[rightsState]

	// namespaces already known to exist on the worker.
	namespaces sync.Map
}

// remoteHandlers receive the changes seen on a worker.
type remoteHandlers struct {
	// mirrorChanged gets every added, updated or deleted mirror.
	mirrorChanged func(worker string, job *batchv1.Job)
	// capacityChanged fires when the worker's ClusterCapacity changes.
	capacityChanged func(worker string)
	// synced fires once the caches hold the worker's state.
	synced func(worker string)
}

func newRemote(name string, cfg *rest.Config, hash, origin string, scheme *runtime.Scheme, h remoteHandlers) (*remote, error) {
	c, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:              {Label: labels.SelectorFromSet(labels.Set{v1alpha1.OriginLabel: origin})},
			&v1alpha1.ClusterCapacity{}: {Field: fields.OneTermEqualSelector("metadata.name", v1alpha1.ClusterCapacityName)},
			// Only names and labels: placement compares Pod Security levels.
			&corev1.Namespace{}: {Transform: namespaceNameAndLabels},
		}}
	})
	if err != nil {
		return nil, fmt.Errorf("building client for worker %s: %w", name, err)
	}
	healthCfg := rest.CopyConfig(cfg)
	healthCfg.Timeout = 5 * time.Second
	health, err := kubernetes.NewForConfig(healthCfg)
	if err != nil {
		return nil, err
	}
	r := &remote{name: name, config: cfg, cluster: c, health: health, kubeconfigHash: hash}
	r.lastErr.Store("")

	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	jobs, err := c.GetCache().GetInformer(ctx, &batchv1.Job{}, cache.BlockUntilSynced(false))
	if err != nil {
		cancel()
		return nil, err
	}
	onJob := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if job, ok := obj.(*batchv1.Job); ok {
			h.mirrorChanged(name, job)
		}
	}
	if _, err := jobs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, obj any) { onJob(obj) }, DeleteFunc: onJob,
	}); err != nil {
		cancel()
		return nil, err
	}
	capacity, err := c.GetCache().GetInformer(ctx, &v1alpha1.ClusterCapacity{}, cache.BlockUntilSynced(false))
	if err != nil {
		cancel()
		return nil, err
	}
	onCapacity := func(any) { h.capacityChanged(name) }
	if _, err := capacity.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: onCapacity, UpdateFunc: func(_, obj any) { onCapacity(obj) }, DeleteFunc: onCapacity,
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := c.GetCache().GetInformer(ctx, &corev1.Namespace{}, cache.BlockUntilSynced(false)); err != nil {
		cancel()
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if c.GetCache().WaitForCacheSync(ctx) {
			r.synced.Store(true)
			h.synced(name)
		}
	}()
	return r, nil
}

func (r *remote) stop() { r.cancel() }

// probe asks the worker's API server whether it is ready.
func (r *remote) probe(ctx context.Context) error {
	_, err := r.health.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		r.healthy.Store(false)
		r.failures.Add(1)
		r.lastErr.Store(err.Error())
		return err
	}
	r.healthy.Store(true)
	r.failures.Store(0)
	r.lastErr.Store("")
	return nil
}

// connected: the worker answers and the caches are in sync.
func (r *remote) connected() bool { return r.synced.Load() && r.healthy.Load() }

// missingRights lists the rights the credential lacked at the last review.
func (r *remote) missingRights() []right {
	if state := r.rights.Load(); state != nil {
		return state.missing
	}
	return nil
}

// client reads from the cache and writes to the worker's API server.
func (r *remote) client() client.Client { return r.cluster.GetClient() }

// mirror returns this installation's Job ns/name on the worker, from the
// cache; callers check connected() first, as an unsynced cache would block.
func (r *remote) mirror(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	if !r.synced.Load() {
		return nil, fmt.Errorf("the cache of worker %s has not synced", r.name)
	}
	job := &batchv1.Job{}
	if err := r.client().Get(ctx, key, job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return job, nil
}

// capacity returns the worker's last published summary, if any. Before the
// cache has synced there is none: a read would block until it syncs, which
// for an unreachable worker is never.
func (r *remote) capacity(ctx context.Context) *v1alpha1.ClusterCapacityStatus {
	if !r.synced.Load() {
		return nil
	}
	cc := &v1alpha1.ClusterCapacity{}
	if err := r.client().Get(ctx, types.NamespacedName{Name: v1alpha1.ClusterCapacityName}, cc); err != nil {
		return nil
	}
	return &cc.Status
}

// namespaceNameAndLabels trims a cached worker namespace to what placement
// reads.
func namespaceNameAndLabels(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels, DeletionTimestamp: ns.DeletionTimestamp,
	}}, nil
}

// namespace returns the worker's namespace of that name from the cache, nil
// when it does not exist.
func (r *remote) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if !r.synced.Load() {
		return nil, fmt.Errorf("the cache of worker %s has not synced", r.name)
	}
	ns := &corev1.Namespace{}
	if err := r.client().Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading namespace %s of worker %s: %w", name, r.name, err)
	}
	return ns, nil
}

// ensureNamespace creates the namespace on the worker, with the given
// labels, the first time a mirror needs it.
func (r *remote) ensureNamespace(ctx context.Context, name string, labels map[string]string) error {
	if _, known := r.namespaces.Load(name); known {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := r.client().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on %s: %w", name, r.name, err)
	}
	r.namespaces.Store(name, struct{}{})
	return nil
}

// uncachedJob reads a Job directly from the worker. Used only after a create
// answered AlreadyExists, to tell our own mirror (not yet in the cache) from a
// same-named Job jobferry must not touch.
func (r *remote) uncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := r.cluster.GetAPIReader().Get(ctx, key, job); err != nil {
		return nil, err
	}
	return job, nil
}
