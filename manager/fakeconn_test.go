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
	c      client.Client
	origin string
	down   bool
	// lags: the cache has not seen anything yet (mirror finds nothing).
	lags bool
	// creates counts the Jobs created there, refused ones included.
	creates *atomic.Int32
	limited []string
	missing []Right
	pools   []v1alpha1.NodePool
	deleted *DeletedMirrors
	// shared: another manager installation's mirror was seen there.
	shared bool
	// noRelabel: the credential may create namespaces, not patch them.
	noRelabel bool
	// beforeCreate, when set, runs before each Job create reaches the fake
	// (a worker user acting in the moment before it).
	beforeCreate func(job *batchv1.Job)
}

// newFakeConn is a connected worker with one idle pool of 8 CPUs.
func newFakeConn(origin string, objs ...client.Object) *fakeConn {
	creates := &atomic.Int32{}
	f := &fakeConn{}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if job, ok := obj.(*batchv1.Job); ok {
				if hook := f.beforeCreate; hook != nil {
					f.beforeCreate = nil
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
	*f = fakeConn{c: c, origin: origin, creates: creates, pools: []v1alpha1.NodePool{{Name: "general", Free: idle, Allocatable: idle}}, deleted: NewDeletedMirrors(clock.RealClock{})}
	return f
}

func (f *fakeConn) Connected() bool             { return !f.down }
func (f *fakeConn) AllowedNamespaces() []string { return f.limited }
func (f *fakeConn) MayUse(ns string) bool {
	return len(f.limited) == 0 || slices.Contains(f.limited, ns)
}
func (f *fakeConn) NamespaceRights() NamespaceRights {
	return NamespaceRights{Create: true, Relabel: !f.noRelabel}
}
func (f *fakeConn) MissingRights() []Right { return f.missing }
func (f *fakeConn) Client() client.Client  { return f.c }

func (f *fakeConn) DeletedMirrors() *DeletedMirrors { return f.deleted }

func (f *fakeConn) Capacity(context.Context) *v1alpha1.ClusterCapacityStatus {
	return &v1alpha1.ClusterCapacityStatus{Pools: f.pools}
}

func (f *fakeConn) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := f.c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns, nil
}

func (f *fakeConn) CreateNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	err := f.c.Create(ctx, ns.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

func (f *fakeConn) RelabelNamespace(ctx context.Context, have, want *corev1.Namespace) error {
	patched := have.DeepCopy()
	patched.Labels = want.Labels
	return f.c.Patch(ctx, patched, client.MergeFromWithOptions(have, client.MergeFromWithOptimisticLock{}))
}

func (f *fakeConn) ForgetNamespace(string) {}

func (f *fakeConn) OriginShared() bool { return f.shared }

// Mirror reads as the real cache does: only Jobs with this origin's label,
// slimmed.
func (f *fakeConn) Mirror(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	if f.lags {
		return nil, nil
	}
	job, err := f.UncachedJob(ctx, key)
	if apierrors.IsNotFound(err) || (err == nil && job.Labels[v1alpha1.OriginLabel] != f.origin) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	slim, err := slimMirror(job)
	return slim.(*batchv1.Job), err
}

func (f *fakeConn) UncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := f.c.Get(ctx, key, job); err != nil {
		return nil, err
	}
	return job, nil
}

// fakeConnections are the workers of a unit test, by name.
type fakeConnections map[string]*fakeConn

func (f fakeConnections) conn(worker string) Conn {
	if c, ok := f[worker]; ok {
		return c
	}
	return nil
}

func (f fakeConnections) names() []string { return slices.Sorted(maps.Keys(f)) }

// fixedKey is a key source holding one key.
type fixedKey jobstate.Key

func (f fixedKey) Key(context.Context) (jobstate.Key, error) { return jobstate.Key(f), nil }

// testKey seals the state of the unit tests' Jobs; it was made long before
// any of them.
var testKey = fixedKey{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: stepNow.Add(-24 * time.Hour)}
