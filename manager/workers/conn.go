package workers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Lookup finds the connection to a worker by name: the Pool, or
// workerstest.Pool in tests.
type Lookup interface {
	// Conn is nil when there is none.
	Conn(worker string) Conn
	Names() []string
}

// Conn is what the manager's controllers use of a connection to a worker,
// by role: what the manager knows of the worker (ConnState), its mirrors and
// their pods (MirrorReader), its namespaces (WorkerNamespaces), and a
// client that writes to its API server. *Connection is the real one; unit
// tests use workerstest.Conn. A consumer that needs one role takes that
// one.
type Conn interface {
	ConnState
	MirrorReader
	WorkerNamespaces
	// Client reads from the worker's caches (Jobs, from its API server:
	// Mirror and Mirrors read mirrors from their own) and writes to its
	// API server.
	Client() client.Client
}

// ConnState is what the manager knows of a worker through its connection:
// whether it is connected, what its credential may do, its version and
// capacity.
type ConnState interface {
	Connected() bool
	// AllowedNamespaces are the only namespaces the manager may use there
	// (WorkerCluster spec.namespaces); empty: every namespace.
	AllowedNamespaces() []string
	MayUse(ns string) bool
	NamespaceRights() NamespaceRights
	MissingRights() []Right
	// Capacity is the worker's last capacity summary (nil: none), shared:
	// read it, never write it.
	Capacity(ctx context.Context) *v1alpha1.ClusterCapacityStatus
	// KubernetesVersion is the worker's, as its API server last said (nil:
	// not known yet).
	KubernetesVersion() *KubernetesVersion
	// OriginShared: another manager installation with this manager's
	// origin made mirrors there.
	OriginShared() bool
}

// MirrorReader reads the worker's mirrors (from the connection's cache,
// or its API server where said) and their pods.
type MirrorReader interface {
	Mirror(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error)
	// MirrorMeta is the identity and jobferry's labels of the mirror at
	// key (nil: none cached), the cache's own: read it, never change it.
	// What a look at every worker for one Job reads (a stray mirror)
	// costs a pointer each, not a Job.
	MirrorMeta(ctx context.Context, key types.NamespacedName) (*metav1.ObjectMeta, error)
	// Mirrors are the cached mirrors in a namespace (metav1.NamespaceAll:
	// all), sharing the cache's maps and pointers: read them, never
	// change them.
	Mirrors(ctx context.Context, namespace string) ([]batchv1.Job, error)
	// MirrorMetas are the identity and jobferry's labels of the same
	// mirrors, the cache's own: read them, never change them. What a scan
	// of every mirror reads (the orphan collector) costs a pointer each,
	// not a Job.
	MirrorMetas(ctx context.Context, namespace string) ([]*metav1.ObjectMeta, error)
	UncachedJob(ctx context.Context, key types.NamespacedName) (*batchv1.Job, error)
	// UncachedJobMeta reads a Job's metadata from the worker's API server.
	UncachedJobMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error)
	// PodMeta reads a pod's metadata from the worker's API server (never
	// cached); ErrMayNotReadPods when the credential may not.
	PodMeta(ctx context.Context, key types.NamespacedName) (*metav1.PartialObjectMetadata, error)
	// DeletedMirrors are the mirrors this manager deleted there lately.
	DeletedMirrors() *DeletedMirrors
}

// WorkerNamespaces reads, makes and collects the worker's namespaces.
type WorkerNamespaces interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	CreateNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error)
	RelabelNamespace(ctx context.Context, have, want *corev1.Namespace) error
	ForgetNamespace(name string)
	// CreatedNamespaces finds and deletes the namespaces this manager
	// created there (the orphan collector's, with NamespaceRights.Collect).
	CreatedNamespaces() CreatedNamespaces
}
