package manager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
)

// fakeConn is a worker for unit tests: a fake client stands for both the
// worker's API server and its cache (which holds only this installation's
// mirrors), with a fixed capacity summary and rights.
type fakeConn struct {
	API      client.Client
	Origin string
	Down   bool
	// Lags: the cache has not seen anything yet (mirror finds nothing).
	Lags bool
	// Creates counts the Jobs created there, refused ones included.
	Creates *atomic.Int32
	Limited []string
	Missing []Right
	Pools   []v1alpha1.NodePool
	Deleted *DeletedMirrors
	// Shared: another manager installation's mirror was seen there.
	Shared bool
	// NoRelabel: the credential may create namespaces, not patch them.
	NoRelabel bool
	// BeforeCreate, when set, runs before each Job create reaches the fake
	// (a worker user acting in the moment before it).
	BeforeCreate func(job *batchv1.Job)
}

// newFakeConn is a connected worker with one idle pool of 8 CPUs.
func newFakeConn(origin string, objs ...client.Object) *fakeConn {
	creates := &atomic.Int32{}
	f := &fakeConn{}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if job, ok := obj.(*batchv1.Job); ok {
				if hook := f.BeforeCreate; hook != nil {
					f.BeforeCreate = nil
					hook(job)
				}
				n := creates.Add(1)
				if obj.GetUID() == "" {
					// As an API server does; the fake client leaves it empty.
					obj.SetUID(types.UID(fmt.Sprintf("worker-uid-%d", n)))
				}
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	idle := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	*f = fakeConn{API: c, Origin: origin, Creates: creates, Pools: []v1alpha1.NodePool{{Name: "general", Free: idle, Allocatable: idle}}, Deleted: NewDeletedMirrors(clock.RealClock{})}
	return f
}

func (f *fakeConn) Connected() bool             { return !f.Down }
func (f *fakeConn) AllowedNamespaces() []string { return f.Limited }
func (f *fakeConn) MayUse(ns string) bool {
	return len(f.Limited) == 0 || slices.Contains(f.Limited, ns)
}
func (f *fakeConn) NamespaceRights() NamespaceRights {
	return NamespaceRights{Create: true, Relabel: !f.NoRelabel}
}
func (f *fakeConn) MissingRights() []Right { return f.Missing }
func (f *fakeConn) Client() client.Client  { return f.API }

func (f *fakeConn) DeletedMirrors() *DeletedMirrors { return f.Deleted }

func (f *fakeConn) Capacity(context.Context) *v1alpha1.ClusterCapacityStatus {
	return &v1alpha1.ClusterCapacityStatus{Pools: f.Pools}
}

func (f *fakeConn) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := f.API.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns, nil
}

func (f *fakeConn) CreateNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	err := f.API.Create(ctx, ns.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

func (f *fakeConn) RelabelNamespace(ctx context.Context, have, want *corev1.Namespace) error {
	patched := have.DeepCopy()
	patched.Labels = want.Labels
	return f.API.Patch(ctx, patched, client.MergeFromWithOptions(have, client.MergeFromWithOptimisticLock{}))
}

func (f *fakeConn) ForgetNamespace(string) {}

func (f *fakeConn) OriginShared() bool { return f.Shared }

// Mirror reads as the real cache does: only Jobs with this origin's label,
// slimmed.
func (f *fakeConn) Mirror(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
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
	slim, err := SlimMirror(job)
	return slim.(*batchv1.Job), err
}

func (f *fakeConn) UncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := f.API.Get(ctx, key, job); err != nil {
		return nil, err
	}
	return job, nil
}

// fakeConnections are the workers of a unit test, by name.
type fakeConnections map[string]*fakeConn

func (f fakeConnections) Conn(worker string) Conn {
	if c, ok := f[worker]; ok {
		return c
	}
	return nil
}

func (f fakeConnections) Names() []string { return slices.Sorted(maps.Keys(f)) }

// fixedKey is a key source holding one key.
type fixedKey jobstate.Key

func (f fixedKey) Key(context.Context) (jobstate.Key, error) { return jobstate.Key(f), nil }

// testKey seals the state of the unit tests' Jobs; it was made long before
// any of them.
var testKey = fixedKey{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: stepNow.Add(-24 * time.Hour)}
