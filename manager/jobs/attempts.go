package jobs

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jobferry/jobferry/manager/jobstate"
)

// attemptMemo remembers, per manager Job, the dispatch attempt this manager
// placed and the mirror it created for it, until the worker's cache shows
// that mirror recorded on the Job (then the Job's own state says it all).
// It tells apart the mirror of an attempt a previous leader placed and
// created but did not live to record (adopted) from a Job someone made with
// the labels of an attempt this manager placed itself and has not created
// yet (not ours); and a mirror just created from one the cache does not
// show yet (expected).
type attemptMemo struct {
	mu    sync.Mutex
	byJob map[types.NamespacedName]attemptRecord
}

type attemptRecord struct {
	uid     types.UID
	attempt int
	// mirrorUID is the mirror created for the attempt, at created; empty
	// until then.
	mirrorUID types.UID
	created   time.Time
}

// placed records that this manager placed the Job's current attempt.
func (m *attemptMemo) placed(job *batchv1.Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byJob == nil {
		m.byJob = map[types.NamespacedName]attemptRecord{}
	}
	m.byJob[client.ObjectKeyFromObject(job)] = attemptRecord{uid: job.UID, attempt: jobstate.Attempt(job)}
}

// created records the mirror this manager created for the Job's current
// attempt, at a time.
func (m *attemptMemo) created(job *batchv1.Job, mirrorUID types.UID, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byJob == nil {
		m.byJob = map[types.NamespacedName]attemptRecord{}
	}
	m.byJob[client.ObjectKeyFromObject(job)] = attemptRecord{uid: job.UID, attempt: jobstate.Attempt(job), mirrorUID: mirrorUID, created: at}
}

// of is what this manager remembers of the Job's current attempt.
func (m *attemptMemo) of(job *batchv1.Job) (attemptRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.byJob[client.ObjectKeyFromObject(job)]
	if !ok || rec.uid != job.UID || rec.attempt != jobstate.Attempt(job) {
		return attemptRecord{}, false
	}
	return rec, true
}

func (m *attemptMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byJob, key)
}

// highestAttempts remembers, per Job, the highest dispatch attempt this
// manager saw its trusted state record: the attempt only grows in
// jobferry's own writes, so a lower one is an earlier state written back
// (a rollback, which its seal cannot tell). Its memory only: a manager that
// starts afresh learns it from the mirrors it can see (strayMirror).
type highestAttempts struct {
	mu    sync.Mutex
	byJob map[types.NamespacedName]seenAttempt
}

type seenAttempt struct {
	uid     types.UID
	attempt int
}

// see notes that the Job's state records attempt and returns the highest
// attempt seen of it (of this UID; a new Job of the name starts afresh).
func (h *highestAttempts) see(key types.NamespacedName, uid types.UID, attempt int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byJob == nil {
		h.byJob = map[types.NamespacedName]seenAttempt{}
	}
	seen, ok := h.byJob[key]
	if !ok || seen.uid != uid || attempt > seen.attempt {
		seen = seenAttempt{uid: uid, attempt: attempt}
		h.byJob[key] = seen
	}
	return seen.attempt
}

// forget drops what was seen of the Job (it is gone).
func (h *highestAttempts) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byJob, key)
}
