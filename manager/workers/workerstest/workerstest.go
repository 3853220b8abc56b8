// Package workerstest has the fake workers every manager package's unit
// tests share: a connection whose worker is a fake client, and a pool of
// them that tells its subscribers what the tests make happen. Only tests
// import it.
package workerstest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"sync"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
)

// Conn is a worker for unit tests: a fake client stands for both the
// worker's API server and its cache (which holds only this installation's
// mirrors), with a fixed capacity summary and rights.
type Conn struct {
	API    client.Client
	Origin string
	Down   bool
	// Lags: the cache has not seen anything yet (mirror finds nothing).
	Lags bool
	// Creates counts the Jobs created there, refused ones included.
	Creates *atomic.Int32
	Limited []string
	Missing []workers.Right
	Pools   []v1alpha1.NodePool
	Deleted *workers.DeletedMirrors
	// Shared: another manager installation's mirror was seen there.
	Shared bool
	// NoRelabel: the credential may create namespaces, not patch them.
	NoRelabel bool
	// NoCollect: the credential may create namespaces, not list and
	// delete them.
	NoCollect bool
	// NamespaceDeletes are the namespaces deleted through
	// CreatedNamespaces, in order.
	NamespaceDeletes []string
	// PodsUnreadable: the credential may not get pods.
	PodsUnreadable bool
	// PodReads counts the pod reads (PodMeta) asked of it.
	PodReads atomic.Int32
	// Version is the worker's Kubernetes version (nil: not known).
	Version *workers.KubernetesVersion
	// BeforeCreate, when set, runs before each Job create reaches the fake
	// (a worker user acting in the moment before it).
	BeforeCreate func(job *batchv1.Job)
}

// NewConn is a connected worker with one idle pool of 8 CPUs.
func NewConn(origin string, objs ...client.Object) *Conn {
	creates := &atomic.Int32{}
	f := &Conn{}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if job, ok := obj.(*batchv1.Job); ok {
				if hook := f.BeforeCreate; hook != nil {
					f.BeforeCreate = nil
					hook(job)
				}
				creates.Add(1)
				if obj.GetUID() == "" {
					// As an API server does (the fake client leaves it
					// empty): unique across the fake workers, as two
					// clusters' UIDs are.
					obj.SetUID(types.UID(fmt.Sprintf("worker-uid-%d", uids.Add(1))))
				}
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	idle := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	*f = Conn{API: c, Origin: origin, Creates: creates, Pools: []v1alpha1.NodePool{{Name: "general", Free: idle, Allocatable: idle}}, Deleted: workers.NewDeletedMirrors(clock.RealClock{}),
		Version: &workers.KubernetesVersion{GitVersion: "v1.36.3", Parsed: version.MustParseGeneric("v1.36.3")}}
	return f
}

func (f *Conn) Connected() bool             { return !f.Down }
func (f *Conn) AllowedNamespaces() []string { return f.Limited }
func (f *Conn) MayUse(ns string) bool {
	return len(f.Limited) == 0 || slices.Contains(f.Limited, ns)
}
func (f *Conn) NamespaceRights() workers.NamespaceRights {
	return workers.NamespaceRights{Create: true, Relabel: !f.NoRelabel, Collect: !f.NoCollect}
}
func (f *Conn) MissingRights() []workers.Right { return f.Missing }
func (f *Conn) KubernetesVersion() *workers.KubernetesVersion {
	return f.Version
}
func (f *Conn) Client() client.Client { return f.API }

func (f *Conn) DeletedMirrors() *workers.DeletedMirrors { return f.Deleted }

func (f *Conn) Capacity(context.Context) *v1alpha1.ClusterCapacityStatus {
	return &v1alpha1.ClusterCapacityStatus{Pools: f.Pools}
}

func (f *Conn) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := f.API.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns, nil
}

func (f *Conn) CreateNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	err := f.API.Create(ctx, ns.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

func (f *Conn) RelabelNamespace(ctx context.Context, have, want *corev1.Namespace) error {
	patched := have.DeepCopy()
	patched.Labels = want.Labels
	return f.API.Patch(ctx, patched, client.MergeFromWithOptions(have, client.MergeFromWithOptimisticLock{}))
}

func (f *Conn) ForgetNamespace(string) {}

func (f *Conn) CreatedNamespaces() workers.CreatedNamespaces { return createdNamespaces{f} }

// createdNamespaces reads the fake's namespaces and Jobs as the real one
// reads the worker's API server.
type createdNamespaces struct{ f *Conn }

// List hands the fake's namespaces over in pages of two, as the real one
// does in pages of workers.CreatedNamespacesPage.
func (n createdNamespaces) List(ctx context.Context, managerID string, visit func([]metav1.PartialObjectMetadata) bool) error {
	var list corev1.NamespaceList
	if err := n.f.API.List(ctx, &list, client.MatchingLabels{v1alpha1.ManagerIDLabel: managerID}); err != nil {
		return err
	}
	out := make([]metav1.PartialObjectMetadata, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: ns.ObjectMeta})
	}
	for page := range slices.Chunk(out, 2) {
		if !visit(page) {
			return nil
		}
	}
	return nil
}

func (n createdNamespaces) Holds(ctx context.Context, namespace string) (string, error) {
	var jobs batchv1.JobList
	if err := n.f.API.List(ctx, &jobs, client.InNamespace(namespace)); err != nil {
		return "", err
	}
	if len(jobs.Items) > 0 {
		return "Job " + jobs.Items[0].Name, nil
	}
	var accounts corev1.ServiceAccountList
	if err := n.f.API.List(ctx, &accounts, client.InNamespace(namespace)); err != nil {
		return "", err
	}
	for _, sa := range accounts.Items {
		if sa.Name != "default" {
			return "ServiceAccount " + sa.Name, nil
		}
	}
	return "", nil
}

// Delete checks the preconditions itself: the fake client does not.
func (n createdNamespaces) Delete(ctx context.Context, meta *metav1.PartialObjectMetadata) (bool, error) {
	ns := &corev1.Namespace{}
	if err := n.f.API.Get(ctx, types.NamespacedName{Name: meta.Name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if ns.UID != meta.UID || ns.ResourceVersion != meta.ResourceVersion {
		return false, nil
	}
	if err := n.f.API.Delete(ctx, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	n.f.NamespaceDeletes = append(n.f.NamespaceDeletes, meta.Name)
	return true, nil
}

func (f *Conn) OriginShared() bool { return f.Shared }

// Mirror reads as the real cache does: only Jobs with this origin's label,
// slimmed.
func (f *Conn) Mirror(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	if f.Lags {
		return nil, nil
	}
	job, err := f.UncachedJob(ctx, key)
	if apierrors.IsNotFound(err) || (err == nil && job.Labels[v1alpha1.OriginLabel] != f.Origin) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return workers.SlimMirror(job), nil
}

// uids numbers the UIDs the fake workers give the objects created there.
var uids atomic.Int64

// MirrorMeta is Mirror's metadata, as the real cache gives it.
func (f *Conn) MirrorMeta(ctx context.Context, key types.NamespacedName) (*metav1.ObjectMeta, error) {
	m, err := f.Mirror(ctx, key)
	if m == nil || err != nil {
		return nil, err
	}
	return &m.ObjectMeta, nil
}

// Mirrors lists as the real cache does: Jobs with this origin's label in
// the namespaces the manager may use, slimmed.
func (f *Conn) Mirrors(ctx context.Context, ns string) ([]batchv1.Job, error) {
	if f.Lags || (ns != metav1.NamespaceAll && !f.MayUse(ns)) {
		return nil, nil
	}
	var list batchv1.JobList
	if err := f.API.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.OriginLabel: f.Origin}); err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for i := range list.Items {
		if f.MayUse(list.Items[i].Namespace) {
			out = append(out, *workers.SlimMirror(&list.Items[i]))
		}
	}
	return out, nil
}

func (f *Conn) MirrorMetas(ctx context.Context, ns string) ([]*metav1.ObjectMeta, error) {
	mirrors, err := f.Mirrors(ctx, ns)
	out := make([]*metav1.ObjectMeta, len(mirrors))
	for i := range mirrors {
		out[i] = &mirrors[i].ObjectMeta
	}
	return out, err
}

// PodMeta reads a pod of the fake's as the real connection does, refusing
// when PodsUnreadable says the credential may not.
func (f *Conn) PodMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	f.PodReads.Add(1)
	if f.PodsUnreadable {
		return nil, workers.ErrMayNotReadPods
	}
	return workers.ReadMeta(ctx, f.API, corev1.SchemeGroupVersion.WithKind("Pod"), key)
}

func (f *Conn) UncachedJobMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	return workers.ReadMeta(ctx, f.API, batchv1.SchemeGroupVersion.WithKind("Job"), key)
}

func (f *Conn) UncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := f.API.Get(ctx, key, job); err != nil {
		return nil, err
	}
	return job, nil
}

// Pool is the workers of a unit test, by name: it stands for
// workers.Pool wherever a package takes the pool as an interface, and tells
// its subscribers what a test makes happen on the workers (MirrorChanged,
// CapacityChanged).
type Pool struct {
	Conns map[string]*Conn

	mu       sync.Mutex
	handlers []workers.Handlers
}

// NewPool is a pool of the given workers.
func NewPool(conns map[string]*Conn) *Pool {
	if conns == nil {
		conns = map[string]*Conn{}
	}
	return &Pool{Conns: conns}
}

// Conn is nil when there is no such worker.
func (p *Pool) Conn(worker string) workers.Conn {
	if c, ok := p.Conns[worker]; ok {
		return c
	}
	return nil
}

func (p *Pool) Names() []string { return slices.Sorted(maps.Keys(p.Conns)) }

func (p *Pool) Connected(worker string) bool {
	c, ok := p.Conns[worker]
	return ok && c.Connected()
}

func (p *Pool) Subscribe(h workers.Handlers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handlers = append(p.handlers, h)
}

// RecheckRights returns the rights the fake worker lacks.
func (p *Pool) RecheckRights(_ context.Context, worker string) []workers.Right {
	if c, ok := p.Conns[worker]; ok {
		return c.Missing
	}
	return nil
}

// RightsRefused: the fake's rights are what the test sets.
func (p *Pool) RightsRefused(string) {}

func (p *Pool) ReadNamespaces(context.Context, string) {}

func (p *Pool) subscribers() []workers.Handlers {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.handlers)
}

// MirrorChanged tells the subscribers a mirror changed on worker, as the
// worker's informer does.
func (p *Pool) MirrorChanged(worker string, job *batchv1.Job) {
	for _, h := range p.subscribers() {
		if h.MirrorChanged != nil {
			h.MirrorChanged(worker, job)
		}
	}
}

// CapacityChanged tells the subscribers the worker's summary changed.
func (p *Pool) CapacityChanged(worker string) {
	for _, h := range p.subscribers() {
		if h.CapacityChanged != nil {
			h.CapacityChanged(worker)
		}
	}
}
