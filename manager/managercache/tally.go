package managercache

import (
	"maps"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// The manager's memories of its Jobs that follow the cache's Job events
// instead of listing the cache: a list of every Job copies each one (at
// 100,000 tracked Jobs, 130 MB a collection, ~13 MB per worker a counts
// refresh, 126 MB a metrics scrape with 18,000). The cache delivers every
// Job's events in order, the old object being the one the previous event
// delivered (a re-list included: Jobs gone meanwhile arrive as deletes), so
// a memory kept from them equals one computed over the cache.

// Tally counts the cached Jobs by a key: each event moves one Job from its
// old object's key to its new one's. No entry is kept at zero: the keys may
// come from what a Job's writer says (its annotations), so the map is no
// larger than the Jobs counted.
type Tally[K comparable] struct {
	// keyOf is the key of a Job; false: the Job is not counted.
	keyOf  func(job *batchv1.Job) (K, bool)
	mu     sync.Mutex
	counts map[K]int
}

// NewTally counts the cached Jobs by keyOf.
func NewTally[K comparable](keyOf func(job *batchv1.Job) (K, bool)) *Tally[K] {
	return &Tally[K]{keyOf: keyOf, counts: map[K]int{}}
}

// KeyOf is the key of obj, an object of the cache (or its tombstone);
// false when it is not counted (or not a Job).
func (t *Tally[K]) KeyOf(obj any) (K, bool) {
	job, ok := JobWithoutTemplate(obj)
	if !ok {
		var none K
		return none, false
	}
	return t.keyOf(&job)
}

// Move takes a Job out of its old object's count and into its new one's;
// nil for none (a Job just created, or deleted).
func (t *Tally[K]) Move(before, after any) {
	from, counted := t.KeyOf(before)
	to, counts := t.KeyOf(after)
	t.MoveKey(from, counted, to, counts)
}

// MoveKey is Move for a caller that has the keys already (counted, counts:
// whether the old and the new object are counted).
func (t *Tally[K]) MoveKey(from K, counted bool, to K, counts bool) {
	if counted && counts && from == to {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if counted {
		if t.counts[from]--; t.counts[from] <= 0 {
			delete(t.counts, from)
		}
	}
	if counts {
		t.counts[to]++
	}
}

// Count is how many Jobs have each key now, read at one moment.
func (t *Tally[K]) Count(keys ...K) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, len(keys))
	for i, k := range keys {
		out[i] = t.counts[k]
	}
	return out
}

// Snapshot is a copy of the counts now.
func (t *Tally[K]) Snapshot() map[K]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}

// Handler moves each Job as the informer's events tell.
func (t *Tally[K]) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.Move(nil, obj) },
		UpdateFunc: t.Move,
		DeleteFunc: func(obj any) { t.Move(obj, nil) },
	}
}

// Index keeps a value for each cached Job, by UID: each event sets the
// Job's value from its new object, or forgets it.
type Index[V any] struct {
	// valueOf is what is kept of a Job; false: nothing (it is forgotten).
	valueOf func(job *batchv1.Job) (V, bool)
	mu      sync.RWMutex
	values  map[types.UID]V
}

// NewIndex keeps valueOf of each cached Job.
func NewIndex[V any](valueOf func(job *batchv1.Job) (V, bool)) *Index[V] {
	return &Index[V]{valueOf: valueOf, values: map[types.UID]V{}}
}

// Get is the value kept of the Job of uid; false when none is.
func (x *Index[V]) Get(uid types.UID) (V, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	v, ok := x.values[uid]
	return v, ok
}

// Set keeps the value of obj, an object of the cache, as it is now.
func (x *Index[V]) Set(obj any) {
	job, ok := JobWithoutTemplate(obj)
	if !ok {
		return
	}
	v, keep := x.valueOf(&job)
	x.mu.Lock()
	defer x.mu.Unlock()
	if !keep {
		delete(x.values, job.UID)
		return
	}
	x.values[job.UID] = v
}

// Forget drops the value of obj, a deleted Job (or its tombstone).
func (x *Index[V]) Forget(obj any) {
	job, ok := JobWithoutTemplate(obj)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.values, job.UID)
}

// Len is how many Jobs have a value kept.
func (x *Index[V]) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.values)
}

// Handler keeps x from the informer's events.
func (x *Index[V]) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.Set,
		UpdateFunc: func(_, obj any) { x.Set(obj) },
		DeleteFunc: x.Forget,
	}
}
