package jobcontroller

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationsTimeout bounds how long a sync waits for pod events it expects;
// after it the cache is trusted again (as upstream, 5 minutes).
const expectationsTimeout = 5 * time.Minute

// podExpectations counts the pod creations and deletions a Job's sync made
// and the cache has not shown yet. A Job with outstanding expectations gets
// no new pods, so a lagging cache never causes over-creation.
type podExpectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byKey map[string]*expectation
}

type expectation struct {
	adds, dels int
	since      time.Time
}

func (e *podExpectations) expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]*expectation{}
	}
	// Set, not add: a sync only expects when the previous expectations were
	// met, and deletions are observed twice (deletionTimestamp, then gone).
	e.byKey[key] = &expectation{adds: adds, dels: dels, since: e.clock.Now()}
}

func (e *podExpectations) observe(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		exp.adds -= adds
		exp.dels -= dels
	}
}

func (e *podExpectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.byKey[key]
	if !ok {
		return true
	}
	return (exp.adds <= 0 && exp.dels <= 0) || e.clock.Since(exp.since) > expectationsTimeout
}

func (e *podExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

// finalizerExpectations holds the pods whose tracking finalizer a sync
// removed and the cache still shows: they must not be counted twice.
type finalizerExpectations struct {
	mu    sync.Mutex
	byKey map[string]sets.Set[types.UID]
}

func (e *finalizerExpectations) expectRemoved(key string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]sets.Set[types.UID]{}
	}
	if e.byKey[key] == nil {
		e.byKey[key] = sets.New[types.UID]()
	}
	e.byKey[key].Insert(uids...)
}

func (e *finalizerExpectations) observed(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.byKey[key]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(e.byKey, key)
		}
	}
}

func (e *finalizerExpectations) expected(key string) sets.Set[types.UID] {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byKey[key].Clone()
}

func (e *finalizerExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

// writtenVersions remembers the resourceVersion of each Job's last status
// write. A sync that reads an older Job from the cache would count pods
// against stale uncountedTerminatedPods; it waits for the cache instead.
type writtenVersions struct {
	mu    sync.Mutex
	byUID map[types.UID]uint64
}

func (w *writtenVersions) wrote(uid types.UID, resourceVersion string) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byUID == nil {
		w.byUID = map[types.UID]uint64{}
	}
	w.byUID[uid] = rv
}

// stale says whether a cached Job predates our last write to it.
func (w *writtenVersions) stale(uid types.UID, resourceVersion string) bool {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.byUID[uid]
	return ok && rv < written
}

func (w *writtenVersions) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byUID, uid)
}
