package jobs

import (
	"maps"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/managercache"
)

// jobsTally is the memory behind jobferry_jobs and jobferry_jobs_waiting
// (metrics.go): the manager Jobs counted by what the gauges tell apart,
// kept from the manager cache's Job events (handler), each of which moves
// one Job from its old counts to its new ones. A scrape reads the counts
// instead of copying every Job out of the cache: with 18,000 Jobs tracked,
// that list allocated ~126 MB a scrape, a fifth of what the manager
// allocated while dispatching, and it grows with every Job tracked.
//
// The cache delivers every Job's events in order, the old object being the
// one the previous event delivered (a re-list included: Jobs gone meanwhile
// arrive as deletes), so the tally equals a count over the cache.
type jobsTally struct {
	mu     sync.Mutex
	counts map[jobsKey]int
}

// jobsKey is what the gauges tell a manager Job by: its worker annotation
// (named as registered or not at scrape time), its phase, why it waits
// apart from its worker's connection (JobWaiting), and whether it is
// unfinished (a Job on a worker not connected at scrape time then waits
// for it).
type jobsKey struct {
	worker, phase, waiting string
	unfinished             bool
}

func newJobsTally() *jobsTally { return &jobsTally{counts: map[jobsKey]int{}} }

// jobsKeyOf is the key of a manager Job; false for any other Job.
func jobsKeyOf(obj any) (jobsKey, bool) {
	job, ok := managercache.JobWithoutTemplate(obj)
	if !ok || !v1alpha1.IsManagerJob(&job) {
		return jobsKey{}, false
	}
	return jobsKey{worker: job.Annotations[v1alpha1.WorkerAnnotation], phase: jobstatus.Phase(job.Status),
		waiting: policy.JobWaiting(&job, false), unfinished: !policy.IsFinished(&job)}, true
}

// move takes a Job out of the counts of before and into those of after;
// a nil key is no Job (one just created, or deleted, or not a manager
// Job).
func (t *jobsTally) move(before, after *jobsKey) {
	if before != nil && after != nil && *before == *after {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if before != nil {
		if t.counts[*before]--; t.counts[*before] <= 0 {
			// No entry is left behind: worker names come from Job
			// annotations, so the map is no larger than the Jobs counted.
			delete(t.counts, *before)
		}
	}
	if after != nil {
		t.counts[*after]++
	}
}

// snapshot is a copy of the counts now.
func (t *jobsTally) snapshot() map[jobsKey]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}

// handler moves each manager Job as the cache's events tell.
func (t *jobsTally) handler() toolscache.ResourceEventHandler {
	keyOf := func(obj any) *jobsKey {
		if k, ok := jobsKeyOf(obj); ok {
			return &k
		}
		return nil
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.move(nil, keyOf(obj)) },
		UpdateFunc: func(old, obj any) { t.move(keyOf(old), keyOf(obj)) },
		DeleteFunc: func(obj any) { t.move(keyOf(obj), nil) },
	}
}
