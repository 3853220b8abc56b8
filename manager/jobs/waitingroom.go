package jobs

import (
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// waitingRoom holds the manager Jobs that no worker had room for, by shape.
// Jobs of one shape (namespace, cluster selector, excluded workers, what
// their pods request together and where they may run) get the same answer
// from dispatch.Place, so when capacity frees up the wake-up asks Place for
// the oldest Jobs of each shape and wakes them while they fit, instead of
// reconciling every waiting Job on every capacity summary: that took 40
// reconciles per Job at 5,000 Jobs against 16 at 1,000, and the manager's CPU
// per Job grew with the backlog.
//
// A Job leaves the room when it is woken; its reconcile puts it back if it
// still does not fit. The room is the leader's memory only: a new leader
// reconciles every Job once and fills its own.
type waitingRoom struct {
	mu sync.Mutex
	// shapes holds, per shape, the waiting Jobs oldest first.
	shapes map[string][]waiter
	// shapeOf is the shape each waiting Job is held under.
	shapeOf map[types.NamespacedName]string
	// passes counts the wake-ups begun, so a Job found not fitting just as
	// one ran can tell it may have been missed (add).
	passes uint64
}

// waiter is one waiting Job, ordered by creation, then namespace and name.
type waiter struct {
	key     types.NamespacedName
	created time.Time
}

func (w waiter) compare(o waiter) int {
	if c := w.created.Compare(o.created); c != 0 {
		return c
	}
	if c := strings.Compare(w.key.Namespace, o.key.Namespace); c != 0 {
		return c
	}
	return strings.Compare(w.key.Name, o.key.Name)
}

func newWaitingRoom() *waitingRoom {
	return &waitingRoom{shapes: map[string][]waiter{}, shapeOf: map[types.NamespacedName]string{}}
}

// pass is the number of wake-ups begun so far.
func (w *waitingRoom) pass() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.passes
}

// add holds a Job that did not fit, as placement saw it (job as the user
// wrote it). seen is pass() from before placement read the capacity: add
// reports whether a wake-up began since, which may have missed the Job, so
// the caller asks for another.
func (w *waitingRoom) add(job *batchv1.Job, seen uint64) (missed bool) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	shape := dispatch.Shape(job)
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.shapeOf[key]; ok {
		if old == shape {
			return w.passes != seen
		}
		w.removeLocked(key)
	}
	entry := waiter{key: key, created: job.CreationTimestamp.Time}
	queue := w.shapes[shape]
	i, _ := slices.BinarySearchFunc(queue, entry, waiter.compare)
	w.shapes[shape] = slices.Insert(queue, i, entry)
	w.shapeOf[key] = shape
	return w.passes != seen
}

// remove forgets the Job, placed, deleted or woken.
func (w *waitingRoom) remove(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(key)
}

func (w *waitingRoom) removeLocked(key types.NamespacedName) {
	shape, ok := w.shapeOf[key]
	if !ok {
		return
	}
	delete(w.shapeOf, key)
	queue := slices.DeleteFunc(w.shapes[shape], func(e waiter) bool { return e.key == key })
	if len(queue) == 0 {
		delete(w.shapes, shape)
		return
	}
	w.shapes[shape] = queue
}

// len is the number of waiting Jobs.
func (w *waitingRoom) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.shapeOf)
}

// begin starts a wake-up: it counts it and returns the waiting Jobs by
// shape, each oldest first, the shapes ordered by their oldest Job.
func (w *waitingRoom) begin() [][]types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.passes++
	queues := make([][]waiter, 0, len(w.shapes))
	for _, q := range w.shapes {
		queues = append(queues, q)
	}
	slices.SortFunc(queues, func(a, b []waiter) int { return a[0].compare(b[0]) })
	out := make([][]types.NamespacedName, len(queues))
	for i, q := range queues {
		keys := make([]types.NamespacedName, len(q))
		for j, e := range q {
			keys[j] = e.key
		}
		out[i] = keys
	}
	return out
}

// waitingShape is one shape's waiting Jobs, oldest first, and the workers
// as placement sees them for that shape's namespace.
type waitingShape struct {
	Jobs    []types.NamespacedName
	Workers []dispatch.Worker
}

// toWake decides which waiting Jobs to wake now: per shape, oldest shape
// first, the oldest Jobs while dispatch.Place finds them room, each counted
// against the room of the ones woken before it (as its placement will be
// assumed). The first Job of a shape that does not fit ends that shape: the
// ones behind it would not fit either. lookup reads a Job from the cache
// (nil when gone); Jobs gone, placed or finished meanwhile are returned in
// drop, to be forgotten.
func toWake(shapes []waitingShape, lookup func(types.NamespacedName) *batchv1.Job) (wake, drop []types.NamespacedName) {
	// woken adds up, per worker and pool, what the Jobs woken so far request.
	woken := map[string]map[string]corev1.ResourceList{}
	for _, shape := range shapes {
		workers := withAssumed(shape.Workers, woken)
		for _, key := range shape.Jobs {
			job := lookup(key)
			if job == nil || job.Annotations[v1alpha1.WorkerAnnotation] != "" || policy.IsFinished(job) {
				drop = append(drop, key)
				continue
			}
			decision, err := dispatch.Place(policy.AsUserWroteIt(job), workers)
			if err != nil || !decision.Placed() {
				break
			}
			wake = append(wake, key)
			for i := range workers {
				if workers[i].Name == decision.Worker {
					workers[i].Assumed = addRequest(workers[i].Assumed, decision.Pool, decision.Request)
				}
			}
			woken[decision.Worker] = addRequest(woken[decision.Worker], decision.Pool, decision.Request)
		}
	}
	return wake, drop
}

// withAssumed copies workers with extra added to what each has assumed.
func withAssumed(workers []dispatch.Worker, extra map[string]map[string]corev1.ResourceList) []dispatch.Worker {
	out := slices.Clone(workers)
	for i := range out {
		assumed := map[string]corev1.ResourceList{}
		for pool, l := range out[i].Assumed {
			assumed[pool] = l.DeepCopy()
		}
		for pool, l := range extra[out[i].Name] {
			assumed = addRequest(assumed, pool, l)
		}
		out[i].Assumed = assumed
	}
	return out
}
