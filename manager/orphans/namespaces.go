package orphans

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
)

// NamespaceGetter reads a namespace of the manager cluster, nil when it
// does not exist (admission.NamespaceReader).
type NamespaceGetter interface {
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// namespaceFacts is what the collector read of one namespace this
// installation created on a worker, in the order it reads them: each is
// read only when the ones before leave the namespace a candidate.
type namespaceFacts struct {
	// ours: labelled with this installation's ID (the list asked for it;
	// checked again, as everything read from a worker is).
	ours bool
	// name is the namespace's (and the manager namespace's) name.
	name string
	// othersMarks: it carries a label that is not jobferry's ID, Pod
	// Security's or the API server's name label, a finalizer or an owner —
	// none of which jobferry sets (the worker chart's policy lets it set
	// none): someone else marked it as theirs too (an administrator's
	// acceptance of another manager, a team's label, a tool's owner).
	othersMarks bool
	// terminating: the worker namespace is being deleted already.
	terminating bool
	// managerNamespaceLive: the manager cluster's namespace of that name
	// exists and is not being deleted (as its cache says, and, once the
	// grace has passed, as its API server says): its Jobs may come.
	managerNamespaceLive bool
	// goneFor is how long the collector has found the manager namespace
	// gone (0 the first time).
	goneFor time.Duration
	// holds names something in it that jobferry did not put there and
	// Kubernetes does not put in every namespace: a Job (a mirror or
	// anyone's) or a ServiceAccount other than default ("": nothing).
	holds string
}

// mayBeJobferrys: names that are never a namespace jobferry made for a
// mirror (the dispatch policy reserves kube-*; default is everyone's),
// whatever labels an administrator put on them. The worker chart's
// admission policy refuses their deletion too.
func mayBeJobferrys(name string) bool {
	return !strings.HasPrefix(name, "kube-") && name != "default"
}

// collectNamespace decides whether the collector deletes a namespace this
// installation created on a worker: only one still as jobferry made it
// (no one else's mark), once the manager's namespace of that name has been
// gone (or going: no Job can be made in it any more) for grace, and
// nothing is left in it there that jobferry did not put there and
// Kubernetes does not put in every namespace (holds). Whatever else is in
// it goes with it: an administrator's quota, Secrets, volume claims.
func collectNamespace(f namespaceFacts, grace time.Duration) bool {
	return f.ours && mayBeJobferrys(f.name) && !f.othersMarks && !f.terminating && !f.managerNamespaceLive &&
		f.goneFor >= grace && f.holds == ""
}

// jobferrysLabel: a namespace label jobferry sets or the API server does.
func jobferrysLabel(key string) bool {
	return key == v1alpha1.ManagerIDLabel || key == corev1.LabelMetadataName || strings.HasPrefix(key, "pod-security.kubernetes.io/")
}

// namespaceMemory is what the collector remembers of one namespace this
// installation created on a worker from one collection to the next.
type namespaceMemory struct {
	// goneSince is when the collector first found the manager namespace
	// of that name gone (zero: it has not).
	goneSince time.Time
	// refused is the resourceVersion at which the worker refused to delete
	// it as forbidden: said once, not at every collection.
	refused string
}

// collectNamespaces deletes the namespaces this installation created on a
// worker that collectNamespace lets go, and remembers since when it found
// the others' manager namespaces gone. A namespace a new Job of the
// manager's needs again afterwards is created again (a mirror's create
// into a namespace being deleted is retried once it is gone).
func (gc *Collector) collectNamespaces(ctx context.Context, worker string, conn workers.Conn) {
	if gc.ManagerNamespaces == nil || gc.ManagerNamespacesFresh == nil || gc.ManagerID == "" || !conn.NamespaceRights().Collect {
		// Whatever was remembered is stale once collection stops: the
		// grace starts over when it resumes.
		gc.forgetNamespaces(worker)
		return
	}
	log := logf.FromContext(ctx).WithValues("worker", worker)
	created := conn.CreatedNamespaces()
	before := gc.namespaces[worker]
	after := map[types.UID]namespaceMemory{}
	visited := map[types.UID]bool{}
	complete := true
	err := created.List(ctx, gc.ManagerID, func(page []metav1.PartialObjectMetadata) bool {
		for i := range page {
			if ctx.Err() != nil {
				complete = false
				return false
			}
			ns := &page[i]
			visited[ns.UID] = true
			memory := before[ns.UID]
			facts, err := gc.namespaceFacts(ctx, created, ns, &memory)
			if !memory.goneSince.IsZero() {
				after[ns.UID] = memory
			}
			if err != nil {
				log.Error(err, "reading whether a namespace this manager created is still needed", "namespace", ns.Name)
				continue
			}
			if !collectNamespace(facts, gc.NamespaceGrace) {
				continue
			}
			deleted, err := created.Delete(ctx, ns)
			switch {
			case apierrors.IsForbidden(err):
				if memory.refused != ns.ResourceVersion {
					log.Error(err, "the worker refused to delete a namespace this manager created (said once for this version of it)", "namespace", ns.Name)
				}
				memory.refused = ns.ResourceVersion
				after[ns.UID] = memory
			case err != nil:
				log.Error(err, "deleting a namespace this manager created", "namespace", ns.Name)
			case deleted:
				delete(after, ns.UID)
				metrics.NamespacesDeleted.WithLabelValues(worker).Inc()
				log.Info("deleted a namespace this manager created: the manager's namespace of that name is gone and nothing is left in it",
					"namespace", ns.Name, "goneFor", facts.goneFor.Round(time.Second).String())
			}
		}
		return true
	})
	if err != nil {
		log.Error(err, "listing the namespaces this manager created")
		complete = false
	}
	// What a collection cut short did not reach is remembered as it was.
	if !complete {
		for uid, memory := range before {
			if !visited[uid] {
				after[uid] = memory
			}
		}
	}
	if gc.namespaces == nil {
		gc.namespaces = map[string]map[types.UID]namespaceMemory{}
	}
	gc.namespaces[worker] = after
}

// forgetNamespaces forgets what was remembered of a worker's namespaces.
func (gc *Collector) forgetNamespaces(worker string) { delete(gc.namespaces, worker) }

// namespaceFacts reads what collectNamespace needs of one listed
// namespace, stopping at the first fact that keeps it, and keeps memory
// up to date: since when the manager namespace is gone (the cache's word
// starts the grace; the API server's ends it).
func (gc *Collector) namespaceFacts(ctx context.Context, created workers.CreatedNamespaces, ns *metav1.PartialObjectMetadata, memory *namespaceMemory) (namespaceFacts, error) {
	facts := namespaceFacts{
		ours:        ns.Labels[v1alpha1.ManagerIDLabel] == gc.ManagerID,
		name:        ns.Name,
		terminating: ns.DeletionTimestamp != nil,
		othersMarks: len(ns.Finalizers) > 0 || len(ns.OwnerReferences) > 0,
	}
	for key := range ns.Labels {
		facts.othersMarks = facts.othersMarks || !jobferrysLabel(key)
	}
	if !facts.ours || !mayBeJobferrys(facts.name) || facts.othersMarks || facts.terminating {
		*memory = namespaceMemory{}
		return facts, nil
	}
	cached, err := gc.ManagerNamespaces.Get(ctx, ns.Name)
	if err != nil {
		return facts, err
	}
	if facts.managerNamespaceLive = live(cached); facts.managerNamespaceLive {
		*memory = namespaceMemory{}
		return facts, nil
	}
	now := gc.clock().Now()
	if memory.goneSince.IsZero() {
		memory.goneSince = now
	}
	facts.goneFor = now.Sub(memory.goneSince)
	if facts.goneFor < gc.NamespaceGrace {
		return facts, nil
	}
	// Gone for the grace as the cache says: the API server must say so
	// too (a cache that lags may still miss one made again).
	fresh, err := gc.ManagerNamespacesFresh.Get(ctx, ns.Name)
	if err != nil {
		return facts, err
	}
	if facts.managerNamespaceLive = live(fresh); facts.managerNamespaceLive {
		*memory = namespaceMemory{}
		return facts, nil
	}
	facts.holds, err = created.Holds(ctx, ns.Name)
	return facts, err
}

// live: a manager namespace exists and is not being deleted.
func live(ns *corev1.Namespace) bool { return ns != nil && ns.DeletionTimestamp == nil }
