package queue

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
)

// Reading WorkerClusters is the manager role's right already (the
// WorkerCluster controller's).
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=clusterqueues,verbs=list;watch;update

// Reasons of the Warning Events on a ClusterQueue whose quota cannot
// follow capacity.
const (
	// ReasonQuotaFlavorMissing: the flavor its QuotaFromCapacityAnnotation
	// names is not among its resource groups'.
	ReasonQuotaFlavorMissing = "QuotaFlavorMissing"
	// ReasonQuotaSelectorInvalid: its QuotaClusterSelectorAnnotation does
	// not parse.
	ReasonQuotaSelectorInvalid = "QuotaClusterSelectorInvalid"
	// ReasonQuotaCapped: a worker publishes more capacity than its
	// WorkerCluster's spec.quotaCap; the quota was set with the cap.
	ReasonQuotaCapped = "QuotaCapped"
)

// QuotaReconciler keeps, on each ClusterQueue marked with
// v1alpha1.QuotaFromCapacityAnnotation, the nominal quota of the flavor it
// names equal to the capacity of the eligible workers — connected, not
// cordoned, matching the queue's v1alpha1.QuotaClusterSelectorAnnotation —
// as they publish it (their pools' allocatable: free plus used), so a worker
// joining, draining or lost moves the global quota within seconds. Quota a
// smaller capacity leaves below what is admitted evicts nothing: Kueue
// admits no more until it fits again.
type QuotaReconciler struct {
	Client   client.Client
	Workers  workers.Lookup
	Recorder events.EventRecorder

	// changed carries "some worker's capacity or eligibility changed" to
	// the work queue, coalesced: one pending resync covers many changes.
	changed chan event.GenericEvent
}

// SetupWithManager registers the controller: marked ClusterQueues, every
// WorkerCluster change, and the pool's capacity changes (subscribe).
func (r *QuotaReconciler) SetupWithManager(mgr ctrl.Manager, subscribe func(workers.Handlers)) error {
	r.changed = make(chan event.GenericEvent, 1)
	resync := func(string) {
		select {
		case r.changed <- event.GenericEvent{Object: &kueue.ClusterQueue{}}:
		default: // a resync is pending already
		}
	}
	subscribe(workers.Handlers{CapacityChanged: resync, WorkerReconciled: resync})
	allMarked := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list kueue.ClusterQueueList
		if err := r.Client.List(ctx, &list); err != nil {
			logf.FromContext(ctx).Error(err, "listing ClusterQueues for a capacity change")
			return nil
		}
		var out []reconcile.Request
		for _, cq := range list.Items {
			if _, ok := cq.Annotations[v1alpha1.QuotaFromCapacityAnnotation]; ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cq)})
			}
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterqueue-quota").
		For(&kueue.ClusterQueue{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			_, ok := obj.GetAnnotations()[v1alpha1.QuotaFromCapacityAnnotation]
			return ok
		}))).
		Watches(&v1alpha1.WorkerCluster{}, allMarked).
		WatchesRawSource(source.Channel(r.changed, allMarked)).
		Complete(r)
}

// Reconcile brings the marked flavor's nominal quota in step with the
// eligible workers' capacity, writing only a change.
func (r *QuotaReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, req.NamespacedName, cq); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	flavor, ok := cq.Annotations[v1alpha1.QuotaFromCapacityAnnotation]
	if !ok {
		return reconcile.Result{}, nil
	}
	selector, err := labels.Parse(cq.Annotations[v1alpha1.QuotaClusterSelectorAnnotation])
	if err != nil {
		r.Recorder.Eventf(cq, nil, corev1.EventTypeWarning, ReasonQuotaSelectorInvalid, "SetQuota", "annotation %s: %v; the quota is left alone", v1alpha1.QuotaClusterSelectorAnnotation, err)
		return reconcile.Result{}, nil
	}
	var list v1alpha1.WorkerClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	total := corev1.ResourceList{}
	var capped []string
	for _, wc := range list.Items {
		if wc.Spec.Cordoned || !selector.Matches(labels.Set(wc.Labels)) {
			continue
		}
		conn := r.Workers.Conn(wc.Name)
		if conn == nil || !conn.Connected() {
			continue
		}
		capacity := conn.Capacity(ctx)
		if capacity == nil {
			continue
		}
		adds, over := contribution(capacity.Pools, wc.Spec.QuotaCap)
		addTo(total, adds)
		if len(over) > 0 {
			capped = append(capped, fmt.Sprintf("worker %s publishes %s, above its spec.quotaCap; it adds %s", wc.Name, describeList(over), describeList(adds)))
		}
	}
	updated, changed, missing := withNominalQuota(cq, kueue.ResourceFlavorReference(flavor), total)
	if missing {
		r.Recorder.Eventf(cq, nil, corev1.EventTypeWarning, ReasonQuotaFlavorMissing, "SetQuota",
			"annotation %s names flavor %s, which none of the ClusterQueue's resource groups lists: its quota is left alone", v1alpha1.QuotaFromCapacityAnnotation, flavor)
		return reconcile.Result{}, nil
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("setting the nominal quota of flavor %s in ClusterQueue %s: %w", flavor, cq.Name, err)
	}
	logf.FromContext(ctx).Info("quota follows capacity", "clusterQueue", cq.Name, "flavor", flavor, "quota", describeQuota(updated, kueue.ResourceFlavorReference(flavor)), "capped", capped)
	// Told after the write, with what was written: a cap that binds is
	// either a worker that grew past what its administrator expected or
	// one whose published capacity is a lie.
	for _, c := range capped {
		r.Recorder.Eventf(cq, nil, corev1.EventTypeWarning, ReasonQuotaCapped, "SetQuota", "nominal quota of flavor %s set to %s: %s", flavor, describeQuota(updated, kueue.ResourceFlavorReference(flavor)), c)
	}
	return reconcile.Result{}, nil
}

// capacityOf is what pools hold together: the sum of their allocatable.
func capacityOf(pools []v1alpha1.NodePool) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pools {
		addTo(total, p.Allocatable)
	}
	return total
}

// contribution is what one worker adds to a quota that follows capacity:
// its pools' allocatable, each resource at most its quotaCap (a resource
// the cap does not list is not capped); over is the published capacity of
// each resource the cap cut.
func contribution(pools []v1alpha1.NodePool, quotaCap corev1.ResourceList) (adds, over corev1.ResourceList) {
	adds = capacityOf(pools)
	for name, published := range adds {
		if published.Sign() < 0 {
			// A published capacity below zero (forged) takes nothing
			// from what the other workers add.
			adds[name] = resource.Quantity{}
			continue
		}
		limit, ok := quotaCap[name]
		if !ok || published.Cmp(limit) <= 0 {
			continue
		}
		if over == nil {
			over = corev1.ResourceList{}
		}
		over[name] = published
		adds[name] = limit.DeepCopy()
	}
	return adds, over
}

// addTo adds what into total.
func addTo(total, what corev1.ResourceList) {
	for name, q := range what {
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
}

// describeList names a resource list in a stable order, for a message.
func describeList(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, string(name)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// withNominalQuota is the ClusterQueue with the nominal quota of every
// resource of flavor set to what capacity holds of it (zero for what it
// holds none of); changed says whether that is a change, missing that no
// resource group lists the flavor. Borrowing and lending limits are left
// as the administrator set them.
func withNominalQuota(cq *kueue.ClusterQueue, flavor kueue.ResourceFlavorReference, capacity corev1.ResourceList) (updated *kueue.ClusterQueue, changed, missing bool) {
	updated = cq.DeepCopy()
	missing = true
	for g := range updated.Spec.ResourceGroups {
		for f := range updated.Spec.ResourceGroups[g].Flavors {
			fq := &updated.Spec.ResourceGroups[g].Flavors[f]
			if fq.Name != flavor {
				continue
			}
			missing = false
			for i := range fq.Resources {
				want := capacity[fq.Resources[i].Name]
				if want.Cmp(fq.Resources[i].NominalQuota) != 0 {
					fq.Resources[i].NominalQuota = want.DeepCopy()
					changed = true
				}
			}
		}
	}
	return updated, changed, missing
}

// describeQuota names a flavor's nominal quota in a ClusterQueue, for a log.
func describeQuota(cq *kueue.ClusterQueue, flavor kueue.ResourceFlavorReference) string {
	var parts []string
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			if f.Name != flavor {
				continue
			}
			for _, q := range f.Resources {
				parts = append(parts, string(q.Name)+"="+q.NominalQuota.String())
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
