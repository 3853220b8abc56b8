package jobs

import (
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// The manager's small in-process memories, typed, each with the methods
// that say what it remembers. (The larger ones have files of their own:
// attemptMemo in attempts.go, refusalMemo below, assumeCache in
// assume.go, waitingRoom in waitingroom.go.) A restarted manager starts with them empty; each says
// why that is safe.

// memory is what the Job controller remembers of the Jobs between
// reconciles, one typed store each.
type memory struct {
	// observed: when the mirror changes not copied yet were seen.
	observed observedMemo
	// copies: when the last status copies were written.
	copies copyRate
	// refusals remembers writes the API server rejected, so they are not
	// retried until the Job changes.
	refusals *refusalMemo
	// removed: since when the WorkerClusters of Jobs placed on deleted
	// workers are known to be gone.
	removed removedWorkers
	// finished: the Jobs whose finished status this manager wrote.
	finished finishedMemo
	// checks: what this manager last applied to the admission check of each
	// queued Job's Workload, until the cache shows it.
	checks checkMemo
	// attempts remembers the attempts this manager placed and the mirrors
	// it created for them until the worker's cache shows them recorded
	// (like the expectations of upstream controllers): a reconcile in
	// between must not create the mirror again, nor take someone else's Job
	// for it.
	attempts attemptMemo
	// highest: the highest attempt seen of each Job's state.
	highest highestAttempts
	// replaced: the version of each Job this manager's last write of it
	// replaced, until the cache shows another.
	replaced replacedMemo
}

// replacedMemo remembers, per manager Job key, the resourceVersion of the
// Job that this manager's last write of it replaced: a reconcile that reads
// that very version from the cache (which has not caught up with the
// write) waits for the write's own event instead of acting on a Job it
// knows to be old, where a write could only lose the race (a Conflict: a
// request the manager cluster's API server serves for nothing). Any other
// version is read as it is, and so is this one after replacedFor (an event
// that never came). After a restart the cache shows what was written.
type replacedMemo struct {
	mu       sync.Mutex
	versions map[types.NamespacedName]replacedVersion
}

// replacedVersion: the versions of the Job uid that writes replaced, the
// last at. One reconcile may write twice (a→b→c): a cache still at a or at
// b is behind both.
type replacedVersion struct {
	uid      types.UID
	versions []string
	at       time.Time
}

// replacedFor bounds how long a version is taken as replaced: far longer
// than a watch event takes on a loaded cluster. maxReplaced bounds the
// versions remembered of one Job (its writes within replacedFor, before
// the cache showed one).
const (
	replacedFor = 10 * time.Second
	maxReplaced = 8
)

// wrote records that a write of this manager replaced before with after,
// at now. A write that stored nothing new (the API server keeps the
// version of an update that changes nothing, and sends no event for it)
// replaced nothing.
func (m *replacedMemo) wrote(before, after *batchv1.Job, now time.Time) {
	if after.ResourceVersion == before.ResourceVersion {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.versions == nil {
		m.versions = map[types.NamespacedName]replacedVersion{}
	}
	key := client.ObjectKeyFromObject(before)
	r, ok := m.versions[key]
	if !ok || r.uid != before.UID || now.Sub(r.at) >= replacedFor || len(r.versions) >= maxReplaced {
		r = replacedVersion{uid: before.UID}
	}
	r.versions, r.at = append(r.versions, before.ResourceVersion), now
	m.versions[key] = r
}

// stale reports whether cached is a version writes of this manager
// replaced, the last less than replacedFor ago; the memory of them goes
// once the cache shows another.
func (m *replacedMemo) stale(cached *batchv1.Job, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := client.ObjectKeyFromObject(cached)
	r, ok := m.versions[key]
	if !ok {
		return false
	}
	if r.uid == cached.UID && slices.Contains(r.versions, cached.ResourceVersion) && now.Sub(r.at) < replacedFor {
		return true
	}
	delete(m.versions, key)
	return false
}

// forget drops what is remembered of the Job key.
func (m *replacedMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.versions, key)
}

// finishedMemo remembers the Jobs whose finished status this manager wrote:
// a reconcile on a cache that has not caught up with that write, once the
// finished mirror is deleted, must not create the mirror again (the Job
// would run twice). After a restart the cache shows the status written.
type finishedMemo struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

// wrote records that this manager wrote the Job's finished status.
func (m *finishedMemo) wrote(job *batchv1.Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.uids == nil {
		m.uids = map[types.NamespacedName]types.UID{}
	}
	m.uids[client.ObjectKeyFromObject(job)] = job.UID
}

// has reports whether this manager wrote the finished status of this Job
// (this UID: a new Job of the same name is another).
func (m *finishedMemo) has(job *batchv1.Job) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.uids[client.ObjectKeyFromObject(job)]
	return ok && uid == job.UID
}

// forget drops what is remembered of the Job key (it is gone).
func (m *finishedMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.uids, key)
}

// checkMemo remembers, per manager Job key, the update of jobferry's check
// this manager last applied and the version of the Workload it applied it
// to: a reconcile on a cache still showing that version (which has not
// caught up with the write) reads the check as applied, rather than apply
// it again. Any other version is read as it is. After a restart the cache
// shows what was applied.
type checkMemo struct {
	mu      sync.Mutex
	applied map[types.NamespacedName]appliedCheck
}

type appliedCheck struct {
	workload, version string
	update            workload.CheckUpdate
}

// wrote records that u was applied to the check of the Workload v reads.
func (m *checkMemo) wrote(key types.NamespacedName, v workload.View, u workload.CheckUpdate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied == nil {
		m.applied = map[types.NamespacedName]appliedCheck{}
	}
	m.applied[key] = appliedCheck{workload: v.Workload, version: v.Version, update: u}
}

// view is v with the update applied to it when v is the version that
// update was applied to.
func (m *checkMemo) view(key types.NamespacedName, v workload.View) workload.View {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.applied[key]
	if !ok || a.workload != v.Workload || a.version != v.Version {
		return v
	}
	return a.update.Applied(v)
}

// forget drops what is remembered of the Job key.
func (m *checkMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.applied, key)
}

// observedMemo remembers, per manager Job key, when a mirror change not yet
// copied was first seen: the start of jobferry_status_sync_lag_seconds.
// After a restart the first change seen starts it; on a new leader, the
// first its standby saw (mirrorsHeldBack).
type observedMemo struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

// seen records a change seen at t, unless an older one is not copied yet.
func (m *observedMemo) seen(key types.NamespacedName, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[types.NamespacedName]time.Time{}
	}
	if _, ok := m.at[key]; !ok {
		m.at[key] = t
	}
}

// since is when the oldest change not copied yet was seen; zero when none.
func (m *observedMemo) since(key types.NamespacedName) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at[key]
}

// take returns and forgets when the change now copied was first seen.
func (m *observedMemo) take(key types.NamespacedName) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[key]
	delete(m.at, key)
	return t, ok
}

// removedWorkers remembers when the Job controller first found the
// WorkerCluster of a Job's worker gone (the pool's PlacementsAffected has it
// look at once): the mirrors may still run there, so the Jobs are
// dispatched elsewhere only once the worker-lost timeout has passed since,
// as for a lost worker. A manager that starts after the deletion counts from
// its first look; a WorkerCluster reconciled again (created anew) is
// forgotten.
type removedWorkers struct {
	mu sync.Mutex
	at map[string]time.Time
}

// since records now as when worker was seen gone, unless known, and returns
// the time recorded.
func (m *removedWorkers) since(worker string, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	if at, ok := m.at[worker]; ok {
		return at
	}
	m.at[worker] = now
	return now
}

// forget: worker exists (again).
func (m *removedWorkers) forget(worker string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, worker)
}

// quietCopies is how many status copies within one batch period still
// count as a quiet manager, whose changes are copied at once: a few Jobs
// changing, each seen as soon as its worker shows it; a burst of many is
// batched. At 1,000 Jobs the bench writes tens of copies a second.
const quietCopies = 10

// copyRate remembers when the last quietCopies status copies were written,
// oldest first: the manager is quiet while the oldest of them is more than
// a batch period old. A restarted manager starts quiet.
type copyRate struct {
	mu   sync.Mutex
	last [quietCopies]time.Time
	next int
}

// wrote records a status copy written at t.
func (c *copyRate) wrote(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[c.next] = t
	c.next = (c.next + 1) % quietCopies
}

// quiet: fewer than quietCopies copies were written in the period before
// now.
func (c *copyRate) quiet(now time.Time, period time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	oldest := c.last[c.next]
	return oldest.IsZero() || now.Sub(oldest) >= period
}

// refusalMemo remembers writes the API server rejected, per manager Job and
// write, with the Job's resourceVersion (or generation) at the time, so the
// same write is not made again until the Job changes — capacity changes
// re-enqueue every unplaced Job, which would otherwise retry it each time.
// Entries are keyed by namespace/name, so the Job's key alone (all a
// reconcile of a deleted Job has) forgets them.
type refusalMemo struct {
	mu    sync.Mutex
	byJob map[types.NamespacedName]map[string]string // Job -> action -> version
}

func newRefusalMemo() *refusalMemo {
	return &refusalMemo{byJob: map[types.NamespacedName]map[string]string{}}
}

// versionFor identifies the Job as a refused write saw it; the UID tells a
// Job from a later one of the same name.
func versionFor(job *batchv1.Job, w policy.Write) string {
	if w.RetryOnGeneration {
		return string(job.UID) + "/generation/" + strconv.FormatInt(job.Generation, 10)
	}
	return resourceVersionOf(job, job.ResourceVersion)
}

func resourceVersionOf(job *batchv1.Job, rv string) string {
	return string(job.UID) + "/resourceVersion/" + rv
}

func (m *refusalMemo) remember(job *batchv1.Job, w policy.Write) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	if m.byJob[key] == nil {
		m.byJob[key] = map[string]string{}
	}
	m.byJob[key][w.Action] = versionFor(job, w)
}

// blocked reports whether w was rejected for the Job as it is now.
func (m *refusalMemo) blocked(job *batchv1.Job, w policy.Write) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byJob[client.ObjectKeyFromObject(job)][w.Action]
	return ok && v == versionFor(job, w)
}

// followOwnWrite keeps refusals in force across jobferry's own status write
// (saying why the Job waits), which changes the resourceVersion but nothing
// a refused write depends on.
func (m *refusalMemo) followOwnWrite(job *batchv1.Job, newVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := client.ObjectKeyFromObject(job)
	for action, v := range m.byJob[key] {
		if v == resourceVersionOf(job, job.ResourceVersion) {
			m.byJob[key][action] = resourceVersionOf(job, newVersion)
		}
	}
}

func (m *refusalMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byJob, key)
}
