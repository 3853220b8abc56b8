package jobs

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/workers"
)

// What the Job controller is told of the workers (it subscribes to the
// pool: workers.Handlers) and how that reaches its work queue: the keys
// of the manager Jobs to look at, those whose mirror changed ahead of the
// others, and the wake-up of the Jobs waiting for room.

// subscribe has the pool tell the Job controller what happens on the
// workers.
func (r *JobReconciler) subscribe() {
	r.Workers.Subscribe(workers.Handlers{
		MirrorChanged:      r.mirrorChanged,
		MirrorsHeldBack:    r.mirrorsHeldBack,
		CapacityChanged:    r.capacityChanged,
		WorkerReconciled:   r.workerReconciled,
		PlacementsAffected: r.placementsAffected,
	})
}

// mirrorChanged: a mirror changed on worker. The assumption of a Job whose
// pods run ends with the next summary (after the settle time), as soon as
// the worker shows them, however long the Job waits in the work queue; the
// Job is looked at ahead of the others, and the change's time starts the
// status copy's lag.
func (r *JobReconciler) mirrorChanged(worker string, job *batchv1.Job) {
	if ready := ptr.Deref(job.Status.Ready, 0); jobstatus.Finished(job.Status) || (job.Status.Active > 0 && ready == job.Status.Active) {
		if uid := job.Labels[v1alpha1.OriginUIDLabel]; uid != "" {
			r.placing.assume.running(types.UID(uid))
		}
	}
	r.queueMirrorChange(types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, r.Clock.Now())
}

// queueMirrorChange asks for a look at the manager Job key ahead of the
// others (the mirror source), its status copy's lag counted from seen.
func (r *JobReconciler) queueMirrorChange(key types.NamespacedName, seen time.Time) {
	r.memory.observed.seen(key, seen)
	r.events.mirrors <- event.GenericEvent{Object: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
}

// mirrorsHeldBack: the mirrors that changed while this replica stood by,
// told as it leads. Their Jobs are looked at ahead of the others, as for
// any mirror change: the controller's first list has every manager Job
// at low priority, and those that finished while the lease changed hands
// would wait behind every change seen after. Their status copy's lag
// starts when the standby saw the change. (Nothing is assumed of a Job
// this replica did not dispatch, so the assumptions mirrorChanged ends
// are not this one's.)
func (r *JobReconciler) mirrorsHeldBack(changes []workers.MirrorChange) {
	for _, c := range changes {
		r.queueMirrorChange(c.Job, c.Seen)
	}
}

// capacityChanged: a worker's summary changed; what was assumed of it may
// end, and waiting Jobs may fit.
func (r *JobReconciler) capacityChanged(worker string) {
	r.placing.assume.capacitySeen(worker)
	r.wakeWaiting()
}

// workerReconciled: a WorkerCluster was looked at, so it exists (again); a
// change of it (uncordoned, relabelled, its rights or connection back) may
// give waiting Jobs room, and so may time, as this runs with every health
// probe.
func (r *JobReconciler) workerReconciled(worker string) {
	r.memory.removed.forget(worker)
	r.wakeWaiting()
}

// wakeWaiting asks for a wake-up of the Jobs waiting for room; signals
// sent before it runs are one.
func (r *JobReconciler) wakeWaiting() {
	select {
	case r.events.wake <- struct{}{}:
	default:
	}
}

// enqueue asks for a reconcile of the manager Job ns/name.
func (r *JobReconciler) enqueue(namespace, name string) {
	r.events.jobs <- event.GenericEvent{Object: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// placementsAffected asks for a reconcile of every manager Job placed on
// worker and, when unplaced, of those not placed, read from the placement
// index, not by listing every Job.
func (r *JobReconciler) placementsAffected(ctx context.Context, worker string, unplaced bool) {
	keys := []string{worker}
	if unplaced {
		keys = append(keys, managercache.UnplacedKey)
	}
	for _, key := range keys {
		var jobs batchv1.JobList
		// Copied out of the cache: what it keeps of a Job is not a Job
		// (managercache's cachedJob), and this is rare (a worker's
		// connection or WorkerCluster changed).
		if err := r.Client.List(ctx, &jobs, client.MatchingFields{managercache.PlacementIndex: key}); err != nil {
			// From the cache, so this fails only while stopping; the Jobs'
			// own requeues remain.
			logf.FromContext(ctx).Error(err, "listing manager Jobs to look at again", "placement", key)
			return
		}
		for i := range jobs.Items {
			r.enqueue(jobs.Items[i].Namespace, jobs.Items[i].Name)
		}
	}
}
