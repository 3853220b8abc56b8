package orphans

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// Collector deletes mirrors whose manager Job no longer exists: Jobs
// deleted while their worker was unreachable. It runs at start, every
// Interval, and whenever a worker (re)connects. It reads only caches: the
// manager's Jobs and each worker's mirrors of this installation.
type Collector struct {
	Client client.Client
	// Workers are the connections to the workers: the pool, or a fake in
	// unit tests.
	Workers workers.Lookup
	// ManagerID identifies this installation's mirrors (InstallationID).
	ManagerID string
	Interval  time.Duration
	// Connected gets the workers that (re)connect
	// (workers.Pool.SubscribeConnected).
	Connected <-chan string
}

// SetupWithManager runs the collector on the leader.
func (gc *Collector) SetupWithManager(mgr ctrl.Manager) error { return mgr.Add(gc) }

// Start runs the collection until ctx ends: over every worker at start and
// every Interval (an Interval of 0 or less: at start only), and over each
// worker that (re)connects.
func (gc *Collector) Start(ctx context.Context) error {
	var tick <-chan time.Time
	if gc.Interval > 0 {
		ticker := time.NewTicker(gc.Interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for _, worker := range gc.Workers.Names() {
		gc.collect(ctx, worker)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case worker := <-gc.Connected:
			gc.collect(ctx, worker)
		case <-tick:
			for _, worker := range gc.Workers.Names() {
				gc.collect(ctx, worker)
			}
		}
	}
}

// collectTimeout bounds one worker's collection.
const collectTimeout = time.Minute

// collect deletes the orphaned mirrors on one connected worker.
func (gc *Collector) collect(ctx context.Context, worker string) {
	// One worker that does not answer holds up the others no longer.
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	log := logf.FromContext(ctx).WithValues("worker", worker)
	conn := gc.Workers.Conn(worker)
	if conn == nil || !conn.Connected() {
		return
	}
	var mirrors batchv1.JobList
	if err := conn.Client().List(ctx, &mirrors); err != nil {
		log.Error(err, "listing mirrors for garbage collection")
		return
	}
	if len(mirrors.Items) == 0 {
		metrics.OrphanScans.WithLabelValues(worker).Inc()
		return
	}
	var jobs batchv1.JobList
	if err := gc.Client.List(ctx, &jobs, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing manager Jobs for garbage collection")
		return
	}
	defer metrics.OrphanScans.WithLabelValues(worker).Inc()
	for _, m := range orphans(mirrors.Items, jobs.Items, gc.ManagerID, conn.OriginShared()) {
		deleted, err := workers.DeleteMirror(ctx, conn, worker, m)
		if err != nil {
			log.Error(err, "deleting orphaned mirror", "mirror", client.ObjectKeyFromObject(m))
			continue
		}
		if !deleted {
			continue
		}
		metrics.OrphansDeleted.WithLabelValues(worker).Inc()
		log.Info("deleted orphaned mirror", "mirror", client.ObjectKeyFromObject(m), "originUID", m.Labels[v1alpha1.OriginUIDLabel])
	}
}

// orphans are the mirrors, among those of this installation's origin the
// worker's cache holds, that the collector deletes: those whose manager Job
// (among jobs, the manager's) is gone or being deleted, and those of an
// attempt a later one replaced (fencing after a worker loss). Never one
// being deleted, one without an origin UID, nor one this installation may
// not delete (mayDelete: another installation's, or, once the origin is
// shared there, one that does not say whose it is). A mirror of an attempt
// later than the cached Job's only means the cache lags: kept.
func orphans(mirrors, jobs []batchv1.Job, managerID string, shared bool) []*batchv1.Job {
	live := map[types.UID]*batchv1.Job{}
	for i := range jobs {
		if jobs[i].DeletionTimestamp == nil {
			live[jobs[i].UID] = &jobs[i]
		}
	}
	var out []*batchv1.Job
	for i := range mirrors {
		m := &mirrors[i]
		origin := types.UID(m.Labels[v1alpha1.OriginUIDLabel])
		if origin == "" || m.DeletionTimestamp != nil || !workers.MayDelete(m, managerID, shared) {
			continue
		}
		if job := live[origin]; job != nil && mirror.Attempt(m) >= jobstate.Attempt(job) {
			continue
		}
		out = append(out, m)
	}
	return out
}
