package orphans

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	// othersLabels: it carries a label that is not jobferry's ID, Pod
	// Security's or the API server's name label — someone else marked it
	// (an administrator's acceptance of another manager, a team's label):
	// it is not jobferry's alone.
	othersLabels bool
	// terminating: the worker namespace is being deleted already.
	terminating bool
	// managerNamespaceLive: the manager cluster's namespace of that name
	// exists and is not being deleted (as its cache says, or, when the
	// cache says otherwise, as its API server says): its Jobs may come.
	managerNamespaceLive bool
	// goneFor is how long the collector has found the manager namespace
	// gone (0 the first time).
	goneFor time.Duration
	// holdsJobs: a Job is in it on the worker, this manager's mirror or
	// anyone's (read from the worker's API server, not the mirror cache).
	holdsJobs bool
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
// (no one else's label), once the manager's namespace of that name has
// been gone (or going: no Job can be made in it any more) for grace, and
// no Job at all is left in it there, mirror or not. Whatever else is in it
// goes with it: its quota, Secrets, volumes' claims.
func collectNamespace(f namespaceFacts, grace time.Duration) bool {
	return f.ours && mayBeJobferrys(f.name) && !f.othersLabels && !f.terminating && !f.managerNamespaceLive &&
		f.goneFor >= grace && !f.holdsJobs
}

// jobferrysLabel: a namespace label jobferry sets or the API server does.
func jobferrysLabel(key string) bool {
	return key == v1alpha1.ManagerIDLabel || key == corev1.LabelMetadataName || strings.HasPrefix(key, "pod-security.kubernetes.io/")
}

// collectNamespaces deletes the namespaces this installation created on a
// worker that collectNamespace lets go, and remembers since when it found
// the others' manager namespaces gone. A namespace a new Job of the
// manager's needs again afterwards is created again (a mirror's create
// into a namespace being deleted is retried once it is gone).
func (gc *Collector) collectNamespaces(ctx context.Context, worker string, conn workers.Conn) {
	if gc.ManagerNamespaces == nil || gc.ManagerNamespacesFresh == nil || gc.ManagerID == "" || !conn.NamespaceRights().Collect {
		return
	}
	log := logf.FromContext(ctx).WithValues("worker", worker)
	created := conn.CreatedNamespaces()
	before := gc.goneSince[worker]
	seen := map[types.UID]time.Time{}
	complete := true
	err := created.List(ctx, gc.ManagerID, func(page []metav1.PartialObjectMetadata) bool {
		for i := range page {
			if ctx.Err() != nil {
				complete = false
				return false
			}
			ns := &page[i]
			facts, err := gc.namespaceFacts(ctx, created, ns, before, seen)
			if err != nil {
				log.Error(err, "reading whether a namespace this manager created is still needed", "namespace", ns.Name)
				continue
			}
			if !collectNamespace(facts, gc.NamespaceGrace) {
				continue
			}
			deleted, err := created.Delete(ctx, ns)
			if err != nil {
				log.Error(err, "deleting a namespace this manager created", "namespace", ns.Name)
				continue
			}
			if deleted {
				metrics.NamespacesDeleted.WithLabelValues(worker).Inc()
				log.Info("deleted a namespace this manager created: the manager's namespace of that name is gone and no Job is left in it",
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
		for uid, since := range before {
			if _, ok := seen[uid]; !ok {
				seen[uid] = since
			}
		}
	}
	if gc.goneSince == nil {
		gc.goneSince = map[string]map[types.UID]time.Time{}
	}
	gc.goneSince[worker] = seen
}

// namespaceFacts reads what collectNamespace needs of one listed
// namespace, stopping at the first fact that keeps it; a manager namespace
// found gone is remembered in seen (since when: before's time, or now).
func (gc *Collector) namespaceFacts(ctx context.Context, created workers.CreatedNamespaces, ns *metav1.PartialObjectMetadata, before, seen map[types.UID]time.Time) (namespaceFacts, error) {
	facts := namespaceFacts{
		ours:        ns.Labels[v1alpha1.ManagerIDLabel] == gc.ManagerID,
		name:        ns.Name,
		terminating: ns.DeletionTimestamp != nil,
	}
	for key := range ns.Labels {
		facts.othersLabels = facts.othersLabels || !jobferrysLabel(key)
	}
	if !facts.ours || !mayBeJobferrys(facts.name) || facts.othersLabels || facts.terminating {
		return facts, nil
	}
	live, err := gc.managerNamespaceLive(ctx, ns.Name)
	if err != nil || live {
		facts.managerNamespaceLive = live
		return facts, err
	}
	now := gc.clock().Now()
	since, ok := before[ns.UID]
	if !ok {
		since = now
	}
	seen[ns.UID] = since
	facts.goneFor = now.Sub(since)
	if facts.goneFor < gc.NamespaceGrace {
		return facts, nil
	}
	facts.holdsJobs, err = created.HoldsJobs(ctx, ns.Name)
	return facts, err
}

// managerNamespaceLive: the manager cluster's namespace exists and is not
// being deleted. The cache answers when it has it live; that it is gone or
// going, which lets a worker namespace be deleted, only the API server
// does (ManagerNamespacesFresh): a cache that lags may still hold one
// deleted and made again.
func (gc *Collector) managerNamespaceLive(ctx context.Context, name string) (bool, error) {
	live := func(ns *corev1.Namespace) bool { return ns != nil && ns.DeletionTimestamp == nil }
	cached, err := gc.ManagerNamespaces.Get(ctx, name)
	if err != nil || live(cached) {
		return live(cached), err
	}
	fresh, err := gc.ManagerNamespacesFresh.Get(ctx, name)
	return live(fresh), err
}
