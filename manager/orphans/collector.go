package orphans

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
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
// manager's Jobs (as their events arrive, liveJobs) and each worker's
// mirrors of this installation. Where the credential may, it then deletes
// the namespaces this installation created on the worker that are no
// longer needed (collectNamespaces), read from the worker's API server.
type Collector struct {
	// Jobs is the manager cluster cache's Job informer, and Client reads
	// that cache.
	Jobs   JobInformer
	Client client.Reader
	// Workers are the connections to the workers: the pool, or a fake in
	// unit tests.
	Workers workers.Lookup
	// ManagerID identifies this installation's mirrors (installation.ID).
	ManagerID string
	// ManagerNamespaces reads the manager cluster's namespaces from its
	// cache, ManagerNamespacesFresh from its API server: a worker
	// namespace this installation created goes once the manager's of
	// that name has been gone for NamespaceGrace (either nil: none goes).
	ManagerNamespaces      NamespaceGetter
	ManagerNamespacesFresh NamespaceGetter
	NamespaceGrace         time.Duration
	// Clock times NamespaceGrace (nil: the real one).
	Clock clock.PassiveClock
	// Keys gives the key that seals jobferry's state on manager Jobs
	// (statekey.Keys): a mirror is taken for one a later attempt replaced
	// only when the attempt its Job records is sealed.
	Keys     jobstate.KeySource
	Interval time.Duration
	// Connected gets the workers that (re)connect
	// (workers.Pool.SubscribeConnected).
	Connected <-chan string

	// namespaces is, per worker, what the collector remembers of the
	// namespaces this installation created there (by UID): only those
	// whose manager namespace it found gone, from one collection to the
	// next (the loop's own, never shared).
	namespaces map[string]map[types.UID]namespaceMemory
}

func (gc *Collector) clock() clock.PassiveClock {
	if gc.Clock == nil {
		return clock.RealClock{}
	}
	return gc.Clock
}

// SetupWithManager runs the collector on the leader.
func (gc *Collector) SetupWithManager(mgr ctrl.Manager) error { return mgr.Add(gc) }

// Start runs the collection until ctx ends: over every worker at start and
// every Interval (an Interval of 0 or less: at start only), and over each
// worker that (re)connects. It follows the manager's Jobs from its start
// (on the leader only) and collects nothing before it has seen them all.
func (gc *Collector) Start(ctx context.Context) error {
	live := newLiveJobs()
	registration, err := gc.Jobs.AddEventHandler(live.Handler())
	if err != nil {
		return fmt.Errorf("following the manager's Jobs for garbage collection: %w", err)
	}
	defer func() {
		if err := gc.Jobs.RemoveEventHandler(registration); err != nil {
			logf.FromContext(ctx).Error(err, "no longer following the manager's Jobs for garbage collection")
		}
	}()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return registration.HasSynced(), nil
	}); err != nil {
		return nil // stopped before the Jobs were all seen
	}
	var tick <-chan time.Time
	if gc.Interval > 0 {
		ticker := time.NewTicker(gc.Interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	gc.collectAll(ctx, live.Get)
	for {
		select {
		case <-ctx.Done():
			return nil
		case worker := <-gc.Connected:
			gc.collect(ctx, worker, live.Get)
		case <-tick:
			gc.collectAll(ctx, live.Get)
		}
	}
}

// liveAttempt is the place and dispatch attempt of the manager Job with a
// UID, false when no such Job is live (liveJobs.Get).
type liveAttempt func(types.UID) (liveJob, bool)

// collectAll collects on every worker.
func (gc *Collector) collectAll(ctx context.Context, live liveAttempt) {
	names := gc.Workers.Names()
	for worker := range gc.namespaces {
		if !slices.Contains(names, worker) {
			gc.forgetNamespaces(worker)
		}
	}
	for _, worker := range names {
		gc.collect(ctx, worker, live)
	}
}

// collectTimeout bounds one worker's collection.
const collectTimeout = time.Minute

// collect deletes the orphaned mirrors on one connected worker, then the
// namespaces this installation created there that are no longer needed.
func (gc *Collector) collect(ctx context.Context, worker string, live liveAttempt) {
	// One worker that does not answer holds up the others no longer.
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	conn := gc.Workers.Conn(worker)
	if conn == nil || !conn.Connected() {
		gc.forgetNamespaces(worker)
		return
	}
	gc.collectMirrors(ctx, worker, conn, live)
	gc.collectNamespaces(ctx, worker, conn)
}

// collectMirrors deletes the orphaned mirrors on one connected worker, and
// the mirrors in namespaces being deleted.
func (gc *Collector) collectMirrors(ctx context.Context, worker string, conn workers.Conn, live liveAttempt) {
	log := logf.FromContext(ctx).WithValues("worker", worker)
	// Read, never changed: the cache's own. Metadata is all a scan reads;
	// a Job each, at every scan of every mirror, was a tenth of what the
	// manager allocated with 100,000 Jobs tracked.
	metas, err := conn.MirrorMetas(ctx, metav1.NamespaceAll)
	if err != nil {
		log.Error(err, "listing mirrors for garbage collection")
		return
	}
	defer metrics.OrphanScans.WithLabelValues(worker).Inc()
	for _, meta := range orphans(metas, live, gc.ManagerID, conn.OriginShared()) {
		m := &batchv1.Job{ObjectMeta: *meta}
		// The memory of the manager's Jobs hears of a Job after the cache
		// has it, and a mirror is only ever made from a cached Job: the
		// cache itself, read now, after the mirror was seen, has its Job
		// unless it is gone. A mirror made a moment ago must not pass for
		// an orphan while the memory lags.
		if kept, err := gc.liveInCache(ctx, m); err != nil || kept {
			if err != nil {
				log.Error(err, "reading the manager Job of a mirror that looks orphaned", "mirror", client.ObjectKeyFromObject(m))
			}
			continue
		}
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
	gc.collectMirrorsOfTerminatingNamespaces(ctx, worker, conn, metas)
}

// liveInCache: the manager cache holds the mirror's Job (the same namespace,
// name and UID), not being deleted, at an attempt the mirror's is not
// older than — or at a later attempt that jobferry has not sealed: a raised
// attempt annotation someone else wrote must not get a running mirror
// deleted (the Job's reconciler does not act on such state either).
func (gc *Collector) liveInCache(ctx context.Context, m *batchv1.Job) (bool, error) {
	var job batchv1.Job
	if err := gc.Client.Get(ctx, client.ObjectKeyFromObject(m), &job); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	attempt, ok := liveAttemptOf(&job)
	if !ok || job.UID != types.UID(m.Labels[v1alpha1.OriginUIDLabel]) {
		return false, nil
	}
	if mirror.Attempt(m) >= attempt {
		return true, nil
	}
	key, err := gc.Keys.Key(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the key that seals jobferry's state: %w", err)
	}
	// Only what jobferry sealed: a Job older than the key (its state
	// unsealed) is sealed by its reconciler first.
	verdict, _ := jobstate.Verify(&job, key)
	return verdict != jobstate.Trusted, nil
}

// orphans are the mirrors, among those of this installation's origin the
// worker's cache holds, that the collector deletes: those whose manager Job
// (live says) is gone or being deleted, those not where that Job's mirror
// goes (its namespace and name: a Job made elsewhere with the labels of a
// live Job's mirror), and those of an attempt a later one replaced
// (fencing after a worker loss). Never one being deleted, nor one this
// installation may not delete (mayDelete: another installation's, or,
// once the origin is shared there, one that does not say whose it is);
// one without an origin UID only when it says it is this installation's
// (no mirror of its lacks one). A mirror of an attempt later than the
// cached Job's only means the cache lags: kept. Deleting what claims to
// be this installation's is what bounds it: the mirror cache leaves out
// only Jobs that do not (workers.MaxForeignJobsPerNamespace).
func orphans(mirrors []*metav1.ObjectMeta, live liveAttempt, managerID string, shared bool) []*metav1.ObjectMeta {
	var out []*metav1.ObjectMeta
	for _, m := range mirrors {
		if m.DeletionTimestamp != nil || !workers.MayDelete(m, managerID, shared) {
			continue
		}
		origin := types.UID(m.Labels[v1alpha1.OriginUIDLabel])
		if origin == "" {
			if managerID != "" && m.Labels[v1alpha1.ManagerIDLabel] == managerID {
				out = append(out, m)
			}
			continue
		}
		if job, ok := live(origin); ok && job.key.Namespace == m.Namespace && job.key.Name == m.Name && mirror.Attempt(m) >= job.attempt {
			continue
		}
		out = append(out, m)
	}
	return out
}
