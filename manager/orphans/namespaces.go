package orphans

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
)

// NamespaceGetter reads a namespace of the manager cluster, nil when it
// does not exist (admission.NamespaceReader: the cache, then the API).
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
	// terminating: the worker namespace is being deleted already.
	terminating bool
	// managerNamespaceLive: the manager cluster's namespace of that name
	// exists and is not being deleted: its Jobs may still come.
	managerNamespaceLive bool
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
// installation created on a worker: only once the manager's namespace of
// that name is gone (or going: no Job can be made in it any more) and no
// Job at all is left in it there, mirror or not, so nothing but what
// jobferry left in it goes with it.
func collectNamespace(f namespaceFacts) bool {
	return f.ours && mayBeJobferrys(f.name) && !f.terminating && !f.managerNamespaceLive && !f.holdsJobs
}

// collectNamespaces deletes the namespaces this installation created on a
// worker that collectNamespace lets go. A namespace a new Job of the
// manager's needs again after that is created again (a mirror's create
// into a namespace being deleted is retried once it is gone).
func (gc *Collector) collectNamespaces(ctx context.Context, worker string, conn workers.Conn) {
	if gc.ManagerNamespaces == nil || gc.ManagerID == "" || !conn.NamespaceRights().Collect {
		return
	}
	log := logf.FromContext(ctx).WithValues("worker", worker)
	created := conn.CreatedNamespaces()
	listed, err := created.List(ctx, gc.ManagerID)
	if err != nil {
		log.Error(err, "listing the namespaces this manager created")
		return
	}
	for i := range listed {
		ns := &listed[i]
		facts, err := gc.namespaceFacts(ctx, created, ns)
		if err != nil {
			log.Error(err, "reading whether a namespace this manager created is still needed", "namespace", ns.Name)
			continue
		}
		if !collectNamespace(facts) {
			continue
		}
		deleted, err := created.Delete(ctx, ns)
		if err != nil {
			log.Error(err, "deleting a namespace this manager created", "namespace", ns.Name)
			continue
		}
		if deleted {
			metrics.NamespacesDeleted.WithLabelValues(worker).Inc()
			log.Info("deleted a namespace this manager created: the manager's namespace of that name is gone and no Job is left in it", "namespace", ns.Name)
		}
	}
}

// namespaceFacts reads what collectNamespace needs of one listed
// namespace, stopping at the first fact that keeps it.
func (gc *Collector) namespaceFacts(ctx context.Context, created workers.CreatedNamespaces, ns *metav1.PartialObjectMetadata) (namespaceFacts, error) {
	facts := namespaceFacts{
		ours:        ns.Labels[v1alpha1.ManagerIDLabel] == gc.ManagerID,
		name:        ns.Name,
		terminating: ns.DeletionTimestamp != nil,
	}
	if !facts.ours || !mayBeJobferrys(facts.name) || facts.terminating {
		return facts, nil
	}
	managerNamespace, err := gc.ManagerNamespaces.Get(ctx, ns.Name)
	if err != nil {
		return facts, err
	}
	facts.managerNamespaceLive = managerNamespace != nil && managerNamespace.DeletionTimestamp == nil
	if facts.managerNamespaceLive {
		return facts, nil
	}
	facts.holdsJobs, err = created.HoldsJobs(ctx, ns.Name)
	return facts, err
}
