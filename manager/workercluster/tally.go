package workercluster

import "sync"

// jobTally is the WorkerCluster controller's memory of its workers' Job
// counts (the DISPATCHED and RUNNING columns): the unfinished manager Jobs
// placed on each worker, and how many of them have an active pod. It is
// kept from the manager-cluster cache's Job events (jobCountsHandler), each
// of which moves one Job from its old counts to its new ones, so a
// reconcile reads a worker's counts without listing its Jobs — at 100,000
// tracked Jobs over ten workers that list copied ~13 MB per worker every
// countsRefresh.
//
// The cache delivers every Job's events in order, its old object being the
// one the previous event delivered (a re-list included: Jobs gone meanwhile
// arrive as deletes), so the tally equals a count over the cache.
type jobTally struct {
	mu       sync.Mutex
	byWorker map[string]workerCounts
}

// workerCounts are one worker's columns.
type workerCounts struct {
	dispatched, running int32
}

func newJobTally() *jobTally {
	return &jobTally{byWorker: map[string]workerCounts{}}
}

// move takes a Job out of the counts before describes and into those
// after describes (the zero jobCounts: none, as for a Job just created or
// deleted).
func (t *jobTally) move(before, after jobCounts) {
	if before == after {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(before, -1)
	t.add(after, 1)
}

func (t *jobTally) add(c jobCounts, n int32) {
	if c.worker == "" || !c.unfinished {
		return
	}
	w := t.byWorker[c.worker]
	w.dispatched += n
	if c.active {
		w.running += n
	}
	// A worker whose Jobs are all finished or gone leaves no entry: the
	// worker names come from Job annotations, so the map is no larger
	// than the Jobs counted.
	if w == (workerCounts{}) {
		delete(t.byWorker, c.worker)
		return
	}
	t.byWorker[c.worker] = w
}

// counts are the worker's columns now.
func (t *jobTally) counts(worker string) workerCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byWorker[worker]
}
