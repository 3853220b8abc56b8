package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/cachebudget"
)

// Connection is the manager's connection to one worker: reads come from
// caches holding only this installation's mirrors (mirrors) and the
// worker's ClusterCapacity, so reconciles never spend API calls on reads.
type Connection struct {
	name   string
	config *rest.Config
	// token authenticates every request; a renewal swaps it in place.
	token   *swappableToken
	cluster cluster.Cluster
	// mirrors caches this installation's mirrors there.
	mirrors *mirrorCache
	health  kubernetes.Interface
	// ctx lives as long as the connection; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	clock  clock.Clock
	// kubeconfigHash identifies the Secret content (and namespaces) the
	// connection was built from, so a changed Secret rebuilds it and an
	// unchanged one does not; a new token of the same ServiceAccount does
	// not count as a change (see identity), it is swapped into token.
	kubeconfigHash string
	// namespaces, when set, are the only namespaces the manager may use
	// there (WorkerCluster spec.namespaces): the cache watches mirrors in
	// those only, and no namespace is ever created.
	namespaces []string

	synced  atomic.Bool
	healthy atomic.Bool
	// probeAsked: a request there got no answer and a probe was asked for
	// (unanswered.go); the next probe clears it.
	probeAsked atomic.Bool
	// askProbe asks the pool's controller to probe the worker now.
	askProbe func(worker string)
	// capacity is the status of the worker's ClusterCapacity as its cache
	// last delivered it (nil while there is none): the cache's own object,
	// shared by every reader, never written.
	capacity atomic.Pointer[v1alpha1.ClusterCapacityStatus]
	// version is the worker's Kubernetes version as the last probe read
	// it (nil until one did).
	version atomic.Pointer[KubernetesVersion]
	// versionErr is why the last probe could not read it ("" when it
	// could); versionErrTaken what TakeVersionError last returned.
	versionErr      atomic.Value // string
	versionErrTaken atomic.Value // string
	// failures counts consecutive failed health probes, for backoff.
	failures atomic.Int32
	lastErr  atomic.Value // string
	// rights is what the last review of the credential's rights found; nil
	// until the first one.
	rights atomic.Pointer[rightsState]
	// reviewDue: a request was refused as forbidden since the last review
	// of the rights, so the next one is due at once.
	reviewDue atomic.Bool
	// sharedOrigin is the first Job with this manager's origin that another
	// manager installation made there, once one is seen (nil until then).
	sharedOrigin atomic.Pointer[OriginConflict]

	// listRefused: the worker refused a list or watch of the caches
	// (forbidden, unauthorized); they keep trying, but there is nothing
	// to wait for (listing).
	listRefused *atomic.Bool
	// cacheFailed is why the worker's caches stopped while the connection
	// was open (nil while they run, and after it is closed): the pool
	// then builds the connection again.
	cacheFailed atomic.Pointer[error]
	// deleted are the mirrors the manager deleted there lately.
	deleted *DeletedMirrors
	// namespaces caches the worker's namespaces the manager read, for
	// namespaceTTL.
	namespaceCache namespaceCache

	// warnings is the watch of the worker's Warning Events, while the
	// credential may (package warnings).
	warnings warningsWatch

	// overBudget counts the objects its caches kept as their identity only
	// (cachebudget), for the WorkerCluster's Warning.
	overBudget *overBudgetTally
	// foreignNotCached counts the Jobs its mirror cache left out as
	// foreign over the cap (foreignCap) since the last report.
	foreignNotCached *overBudgetTally
}

// OriginConflict is a Job another manager installation with this
// manager's origin made on a worker.
type OriginConflict struct {
	Manager string
	Job     types.NamespacedName
}

// OriginShared: a mirror of another manager installation with this
// manager's origin was seen there.
func (c *Connection) OriginShared() bool { return c.sharedOrigin.Load() != nil }

// MayDelete says whether a Job with this installation's origin label on a
// worker may be deleted as one of this manager's mirrors (by fencing, by
// the orphan collector, with its deleted manager Job): not when another
// installation made it, nor, once another installation's mirror was seen
// there (shared), when it does not say which made it.
func MayDelete(m metav1.Object, manager string, shared bool) bool {
	id, labelled := m.GetLabels()[v1alpha1.ManagerIDLabel]
	if labelled {
		return id == manager
	}
	return !shared
}

// namespaceTTL is how long a worker namespace read is reused: placement
// reads the Job's namespace on every worker for each Job, and a burst of
// Jobs comes mostly from few namespaces.
const namespaceTTL = 10 * time.Second

// connHandlers receive the changes seen on a worker.
type connHandlers struct {
	// mirrorChanged gets every added, updated or deleted mirror; listed:
	// an add of the cache's first list (the state it found, not a change
	// it saw).
	mirrorChanged func(worker string, job *batchv1.Job, listed bool)
	// capacityChanged fires when the worker's ClusterCapacity changes.
	capacityChanged func(worker string)
	// synced fires once the caches hold the worker's state.
	synced func(worker string)
	// cacheFailed fires when the caches stop with an error before the
	// connection is closed (Connection.cacheFailed says why).
	cacheFailed func(worker string)
	// unanswered fires when a request to a worker thought healthy got no
	// answer: probe it now (unanswered.go).
	unanswered func(worker string)
}

func (c *Connection) AllowedNamespaces() []string { return c.namespaces }

func (c *Connection) DeletedMirrors() *DeletedMirrors { return c.deleted }

// connectionBuilder is newConnection's signature: the seam where a test
// builds a connection without a worker's caches.
type connectionBuilder func(name string, cfg *rest.Config, token *swappableToken, hash, origin, manager string, namespaces []string, scheme *runtime.Scheme, clk clock.Clock, h connHandlers) (*Connection, error)

// newConnection builds the connection to a worker — its client, the cache
// of its capacity summary and of this installation's mirrors (only in
// namespaces, when set), and the client its probes use — and starts the
// caches; h hears what they see.
func newConnection(name string, cfg *rest.Config, token *swappableToken, hash, origin, manager string, namespaces []string, scheme *runtime.Scheme, clk clock.Clock, h connHandlers) (*Connection, error) {
	// The caches' and the client's requests tell the connection of those
	// that get no answer; it is made below, before any of them starts.
	var self atomic.Pointer[Connection]
	requests := reportingUnanswered(cfg, func() {
		if c := self.Load(); c != nil {
			c.unanswered()
		}
	})
	listRefused := &atomic.Bool{}
	overBudget := &overBudgetTally{}
	watchFailed := func(ctx context.Context, r *toolscache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			listRefused.Store(true)
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	}
	c, err := cluster.New(requests, clusterOptions(scheme, namespaces, overBudget, watchFailed))
	if err != nil {
		return nil, fmt.Errorf("building client for worker %s: %w", name, err)
	}
	foreignNotCached := &overBudgetTally{}
	mirrors, err := newMirrorCache(requests, origin, namespaces, watchFailed, func(job types.NamespacedName, over *cachebudget.Over) {
		overBudget.add("Job "+job.String(), over)
	}, manager, func(job types.NamespacedName) {
		foreignNotCached.addLatest("Job " + job.String())
	})
	if err != nil {
		return nil, fmt.Errorf("building the mirror cache of worker %s: %w", name, err)
	}
	healthCfg := rest.CopyConfig(cfg)
	healthCfg.Timeout = 5 * time.Second
	health, err := kubernetes.NewForConfig(healthCfg)
	if err != nil {
		return nil, err
	}
	r := &Connection{name: name, config: cfg, token: token, cluster: c, mirrors: mirrors, health: health, kubeconfigHash: hash, namespaces: slices.Clone(namespaces), clock: clk, deleted: NewDeletedMirrors(clk), listRefused: listRefused, askProbe: h.unanswered,
		overBudget: overBudget, foreignNotCached: foreignNotCached}
	r.lastErr.Store("")
	self.Store(r)

	ctx, cancel := context.WithCancel(context.Background())
	r.ctx, r.cancel = ctx, cancel
	if err := r.follow(ctx, mirrors, c, h); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			r.cacheFailed.Store(&err)
			h.cacheFailed(name)
		}
	}()
	mirrors.run(ctx)
	go func() {
		if c.GetCache().WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), mirrors.hasSynced) {
			r.synced.Store(true)
			h.synced(name)
		}
	}()
	return r, nil
}

// clusterOptions are the options of a worker's cluster (its client, and a
// cache of its capacity summary: mirrors have a cache of their own).
func clusterOptions(scheme *runtime.Scheme, namespaces []string, overBudget *overBudgetTally, watchFailed toolscache.WatchErrorHandlerWithContext) func(*cluster.Options) {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		// No managedFields: nothing reads them, and the worker's Job
		// controller adds an entry with each status write it makes.
		o.Cache = cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.ClusterCapacity{}: {Field: fields.OneTermEqualSelector("metadata.name", v1alpha1.ClusterCapacityName), Transform: capacityTransform(overBudget)},
		}}
		// Mirrors have a cache of their own (mirrorCache); a read of Jobs
		// through the client must not start a second one of every Job.
		o.Client.Cache = &client.CacheOptions{DisableFor: []client.Object{&batchv1.Job{}}}
		o.Cache.DefaultWatchErrorHandler = watchFailed
		if len(namespaces) > 0 {
			// Namespaced objects in these namespaces only, should one
			// be cached here (mirrors are in mirrorCache, which does
			// the same); the credential may list nothing else.
			o.Cache.DefaultNamespaces = map[string]cache.Config{}
			for _, ns := range namespaces {
				o.Cache.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}
}

// follow has the connection tell the pool of every change of a mirror and
// of the worker's capacity summary.
func (c *Connection) follow(ctx context.Context, mirrors *mirrorCache, cl cluster.Cluster, h connHandlers) error {
	onJob := func(obj any, listed bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if m, ok := obj.(*cachedMirror); ok {
			job := m.view()
			h.mirrorChanged(c.name, &job, listed)
		}
	}
	if err := mirrors.addHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    onJob,
		UpdateFunc: func(_, obj any) { onJob(obj, false) },
		DeleteFunc: func(obj any) { onJob(obj, false) },
	}); err != nil {
		return err
	}
	capacity, err := cl.GetCache().GetInformer(ctx, &v1alpha1.ClusterCapacity{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	onCapacity := func(obj any, deleted bool) {
		if cc, ok := obj.(*v1alpha1.ClusterCapacity); ok && !deleted {
			c.capacity.Store(&cc.Status)
		} else {
			c.capacity.Store(nil)
		}
		h.capacityChanged(c.name)
	}
	if _, err := capacity.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onCapacity(obj, false) },
		UpdateFunc: func(_, obj any) { onCapacity(obj, false) },
		DeleteFunc: func(obj any) { onCapacity(obj, true) },
	}); err != nil {
		return err
	}
	return nil
}

func (c *Connection) stop() { c.cancel() }

// probe asks the worker's API server whether it is ready, and its version:
// read at every probe, as a worker is upgraded (or downgraded) in place,
// its API servers one by one behind one address.
func (c *Connection) probe(ctx context.Context) error {
	c.probeAsked.Store(false)
	_, err := c.health.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err == nil {
		// A read that fails keeps the version last read: a worker whose
		// version is not known yet takes no Job that needs one
		// (dispatch.VersionedFeatures), and one timeout must not hold
		// them all back.
		v, verr := readVersion(ctx, c.health.Discovery().RESTClient())
		if verr == nil {
			c.version.Store(v)
		}
		c.versionErr.Store(errString(verr))
	}
	if err != nil {
		c.healthy.Store(false)
		c.failures.Add(1)
		c.lastErr.Store(err.Error())
		return err
	}
	c.healthy.Store(true)
	c.failures.Store(0)
	c.lastErr.Store("")
	return nil
}

// KubernetesVersion is the worker's, as the last probe read it (nil: no
// probe read it yet).
func (c *Connection) KubernetesVersion() *KubernetesVersion { return c.version.Load() }

// TakeVersionError is why the last probe could not read the version ("":
// it could, or none did yet), and whether that changed since the last
// call: what is worth a log line.
func (c *Connection) TakeVersionError() (string, bool) {
	s, _ := c.versionErr.Load().(string)
	return s, c.versionErrTaken.Swap(s) != s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Healthy: the last probe found the worker ready.
func (c *Connection) Healthy() bool { return c.healthy.Load() }

// Failures counts the probes that failed in a row.
func (c *Connection) Failures() int32 { return c.failures.Load() }

// TakeReviewDue says whether a request there was refused as forbidden
// since it was last asked, so the rights are reviewed at once.
func (c *Connection) TakeReviewDue() bool { return c.reviewDue.Swap(false) }

// OriginConflict is the first mirror of another installation with this
// manager's origin seen there (nil: none).
func (c *Connection) OriginConflict() *OriginConflict { return c.sharedOrigin.Load() }

// Connected: the worker answers and the caches are in sync.
func (c *Connection) Connected() bool { return c.synced.Load() && c.healthy.Load() }

// listing: the worker answers and its caches are still listing what it
// holds (not synced, not failed, not refused).
func (c *Connection) listing() bool {
	return c.healthy.Load() && !c.synced.Load() && c.cacheFailed.Load() == nil && (c.listRefused == nil || !c.listRefused.Load())
}

// MissingRights lists the rights the credential lacked at the last review.
func (c *Connection) MissingRights() []Right {
	if state := c.rights.Load(); state != nil {
		return state.missing
	}
	return nil
}

// Client reads from the worker's caches, Jobs from its API server, and
// writes to its API server.
func (c *Connection) Client() client.Client { return c.cluster.GetClient() }

// Mirror returns this installation's Job ns/name on the worker, from the
// cache; callers check connected() first, as an unsynced cache would block.
func (c *Connection) Mirror(_ context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	m, err := c.mirrorEntry(key)
	if m == nil || err != nil {
		return nil, err
	}
	return m.job(), nil
}

// MirrorMeta is the metadata of this installation's Job at key on the
// worker, the cache's own: to read, never to change (nil: none).
func (c *Connection) MirrorMeta(_ context.Context, key types.NamespacedName) (*metav1.ObjectMeta, error) {
	m, err := c.mirrorEntry(key)
	if m == nil || err != nil {
		return nil, err
	}
	return &m.ObjectMeta, nil
}

// mirrorEntry is the mirror cache's entry for key (nil: none).
func (c *Connection) mirrorEntry(key types.NamespacedName) (*cachedMirror, error) {
	if !c.synced.Load() {
		return nil, fmt.Errorf("the cache of worker %s has not synced", c.name)
	}
	if !c.MayUse(key.Namespace) {
		// The cache holds only the namespaces the manager may use there;
		// there is no mirror it could see (or touch) elsewhere.
		return nil, nil
	}
	return c.mirrors.get(key)
}

// Mirrors are this installation's Jobs on the worker in namespace ns
// (metav1.NamespaceAll: every namespace), from the cache, sharing its maps
// and pointers: to read, never to change.
func (c *Connection) Mirrors(_ context.Context, ns string) ([]batchv1.Job, error) {
	cached, err := c.cachedMirrors(ns)
	if err != nil {
		return nil, err
	}
	out := make([]batchv1.Job, len(cached))
	for i, m := range cached {
		out[i] = m.view()
	}
	return out, nil
}

// MirrorMetas are the cached mirrors' metadata in namespace ns
// (metav1.NamespaceAll: every namespace): the cache's own, to read, never
// to change.
func (c *Connection) MirrorMetas(_ context.Context, ns string) ([]*metav1.ObjectMeta, error) {
	cached, err := c.cachedMirrors(ns)
	if err != nil {
		return nil, err
	}
	out := make([]*metav1.ObjectMeta, len(cached))
	for i, m := range cached {
		out[i] = &m.ObjectMeta
	}
	return out, nil
}

// cachedMirrors are the cached mirrors in namespace ns (metav1.NamespaceAll:
// every namespace); none in a namespace the manager may not use there.
func (c *Connection) cachedMirrors(ns string) ([]*cachedMirror, error) {
	if !c.synced.Load() {
		return nil, fmt.Errorf("the cache of worker %s has not synced", c.name)
	}
	if ns != metav1.NamespaceAll && !c.MayUse(ns) {
		return nil, nil
	}
	return c.mirrors.list(ns)
}

// Capacity returns the worker's last published summary, if any, shared:
// callers read it and never write it (DeepCopy it to keep or change it).
// Placement reads every worker's for each Job; a copy each time was a
// tenth of what the manager allocated while it dispatched. Before the
// cache has synced there is none.
func (c *Connection) Capacity(context.Context) *v1alpha1.ClusterCapacityStatus {
	if !c.synced.Load() {
		return nil
	}
	return c.capacity.Load()
}

// Namespace returns the worker's Namespace of that name (nil when it does
// not exist), read with a GET — the manager's credential may get namespaces,
// not list them — and reused for namespaceTTL.
func (c *Connection) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	now := c.clock.Now()
	if ns, ok := c.namespaceCache.get(name, now, namespaceTTL); ok {
		return ns, nil
	}
	ns := &corev1.Namespace{}
	if err := c.cluster.GetAPIReader().Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading namespace %s of worker %s: %w", name, c.name, err)
		}
		ns = nil
	}
	c.namespaceCache.put(name, ns, now)
	return ns, nil
}

// MayUse: the manager may use namespace ns on the worker.
func (c *Connection) MayUse(ns string) bool {
	return len(c.namespaces) == 0 || slices.Contains(c.namespaces, ns)
}

// NamespaceRights are what the last review found the credential may do
// to namespaces there (none until the first review).
func (c *Connection) NamespaceRights() NamespaceRights {
	state := c.rights.Load()
	if state == nil {
		return NamespaceRights{}
	}
	return state.namespaces
}

// CreateNamespace creates the namespace planWorkerNamespace made, and says
// whether it did: one made in the meantime by someone else is not taken as
// jobferry's (false, and the next read sees it as it is).
func (c *Connection) CreateNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	created := ns.DeepCopy()
	err := c.Client().Create(ctx, created)
	if apierrors.IsAlreadyExists(err) {
		c.ForgetNamespace(ns.Name)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating namespace %s on %s: %w", ns.Name, c.name, err)
	}
	c.namespaceCache.put(ns.Name, created, c.clock.Now())
	return true, nil
}

// RelabelNamespace patches the labels of namespace have to those of want
// (planWorkerNamespace's relabelled namespace), failing if the namespace
// changed since it was read.
func (c *Connection) RelabelNamespace(ctx context.Context, have, want *corev1.Namespace) error {
	patched := have.DeepCopy()
	patched.Labels = want.Labels
	if err := c.Client().Patch(ctx, patched, client.MergeFromWithOptions(have, client.MergeFromWithOptimisticLock{})); err != nil {
		c.ForgetNamespace(have.Name)
		return fmt.Errorf("setting the Pod Security labels of namespace %s on %s: %w", have.Name, c.name, err)
	}
	c.namespaceCache.put(have.Name, patched, c.clock.Now())
	return nil
}

// ForgetNamespace forgets what the manager read of namespace name there: a
// mirror create found it gone or being deleted, or a write to it failed, so
// the next mirror create reads (and creates) it again.
func (c *Connection) ForgetNamespace(name string) {
	c.namespaceCache.forget(name)
}

// ErrMayNotReadPods: the worker credential may not get pods
// (podWarningsRights), as its last rights review found.
var ErrMayNotReadPods = errors.New("the worker credential may not get pods")

// PodMeta reads a pod's metadata directly from the worker: to check that a
// Warning Event naming a pod is about the mirror's pod (its UID and
// controller) before it is forwarded. Read by name, one at a time, never
// listed or kept.
func (c *Connection) PodMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	if state := c.rights.Load(); state == nil || !state.mayReadPods {
		return nil, ErrMayNotReadPods
	}
	return ReadMeta(ctx, c.cluster.GetAPIReader(), corev1.SchemeGroupVersion.WithKind("Pod"), key)
}

// UncachedJobMeta reads a Job's metadata directly from the worker: to find
// a mirror the cache no longer shows (its identity is all that is read).
func (c *Connection) UncachedJobMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	return ReadMeta(ctx, c.cluster.GetAPIReader(), batchv1.SchemeGroupVersion.WithKind("Job"), key)
}

// ReadMeta reads the metadata of the object of kind gvk at key.
func ReadMeta(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, key, m); err != nil {
		return nil, err
	}
	return m, nil
}

// UncachedJob reads a Job directly from the worker. Used only after a create
// answered AlreadyExists, to tell our own mirror (not yet in the cache) from a
// same-named Job jobferry must not touch.
func (c *Connection) UncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := c.cluster.GetAPIReader().Get(ctx, key, job); err != nil {
		return nil, err
	}
	return job, nil
}
