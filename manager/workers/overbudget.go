package workers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/cachebudget"
)

// ReasonObjectsOverBudget is the Warning on a WorkerCluster whose caches
// kept objects as their identity only, being over their budget.
const ReasonObjectsOverBudget = "ObjectsOverBudget"

// ReasonForeignJobsNotCached is the Warning on a WorkerCluster whose
// mirror cache left out Jobs with the origin label this manager did not
// make, being over MaxForeignJobsPerNamespace in their namespace.
const ReasonForeignJobsNotCached = "ForeignJobsNotCached"

// overBudgetTally counts what a connection's caches kept as identity only
// (cachebudget) since it was last taken, and names the latest.
type overBudgetTally struct {
	mu     sync.Mutex
	count  int
	latest string
}

// add counts an object (what names it) kept as its identity only.
func (t *overBudgetTally) add(what string, over *cachebudget.Over) {
	t.addLatest(what + ": " + over.String())
}

// addLatest counts one, latest saying which.
func (t *overBudgetTally) addLatest(latest string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count++
	t.latest = latest
}

// take is the count and the latest since the last take.
func (t *overBudgetTally) take() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, latest := t.count, t.latest
	t.count, t.latest = 0, ""
	return n, latest
}

// ReportOverBudget gives the WorkerCluster a Warning when its worker's
// caches kept objects as their identity only since the last report: at
// most one each reconcile, however many there were.
func (p *Pool) ReportOverBudget(ctx context.Context, wc *v1alpha1.WorkerCluster, conn *Connection) {
	if n, latest := conn.foreignNotCached.take(); n > 0 {
		p.Recorder.Eventf(wc, nil, corev1.EventTypeWarning, ReasonForeignJobsNotCached, "CacheWorkerObjects",
			"%d Jobs with this installation's origin label that are not this manager's mirrors (their %s is another installation's or missing, they name no manager Job, or they are being deleted), added or changed since the last report, "+
				"were not cached: the manager keeps at most %d such Jobs a namespace, and nothing of the others. The latest: %s",
			n, v1alpha1.ManagerIDLabel, MaxForeignJobsPerNamespace, latest)
		logf.FromContext(ctx).Info("foreign Jobs over the cache's cap", "worker", wc.Name, "count", n, "latest", latest)
	}
	n, latest := conn.overBudget.take()
	if n == 0 {
		return
	}
	p.Recorder.Eventf(wc, nil, corev1.EventTypeWarning, ReasonObjectsOverBudget, "CacheWorkerObjects",
		"%d objects of the worker, added or changed since the last report, were over what the manager keeps of one, and are kept as their name, UID and jobferry's labels only: "+
			"nothing is copied from them, and one is read from the worker's API server only when it is a mirror this manager created. The latest: %s", n, latest)
	logf.FromContext(ctx).Info("worker objects over the cache budget", "worker", wc.Name, "count", n, "latest", latest)
}

// capacityTransform is the ClusterCapacity cache's transform: the summary
// (its identity, spec and status) when it is within cachebudget.Capacity,
// else its identity only, marked (OverBudget), told to overBudget. A
// worker whose summary is over its budget shows no pools, so nothing is
// placed there.
func capacityTransform(overBudget *overBudgetTally) func(any) (any, error) {
	return func(obj any) (any, error) {
		cc, ok := obj.(*v1alpha1.ClusterCapacity)
		if !ok {
			return obj, nil
		}
		// Its identity, spec and status: nothing reads its labels or
		// annotations.
		kept := &v1alpha1.ClusterCapacity{TypeMeta: cc.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: cc.Name, UID: cc.UID, ResourceVersion: cc.ResourceVersion},
			Spec: cc.Spec, Status: cc.Status}
		over := meterCapacity(kept)
		if over == nil {
			return kept, nil
		}
		overBudget.add("ClusterCapacity "+cc.Name, over)
		kept.Spec, kept.Status = v1alpha1.ClusterCapacitySpec{}, v1alpha1.ClusterCapacityStatus{}
		kept.Annotations = map[string]string{overBudgetAnnotation: over.String()}
		return kept, nil
	}
}

// meterCapacity says why a capacity summary is over its budget (nil: it
// is not).
func meterCapacity(cc *v1alpha1.ClusterCapacity) *cachebudget.Over {
	meter := cachebudget.NewMeter(cachebudget.Capacity)
	entries, bytes := cachebudget.Measure(&cc.Spec)
	meter.Add("spec", entries, bytes)
	entries, bytes = cachebudget.Measure(&cc.Status)
	meter.Add("status", entries, bytes)
	return meter.Over()
}
