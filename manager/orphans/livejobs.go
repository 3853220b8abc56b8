package orphans

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
)

// JobInformer is the manager cluster cache's Job informer
// (cache.Informer), which the collector follows; a fake in unit tests.
type JobInformer interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error
}

// liveJobs is the collector's memory of the manager's Jobs: the dispatch
// attempt (jobstate.Attempt) of each one not being deleted, by UID, kept
// from the cache's Job events. A collection looks mirrors up in it instead
// of listing every manager Job: at 100,000 Jobs that list copied 130 MB
// every collection and was a tenth of all the manager allocated.
//
// It holds one entry per cached Job, and is complete only once its
// registration has synced (every Job in the cache when it registered
// delivered): before, a missing Job would be taken for a gone one.
type liveJobs struct {
	mu       sync.RWMutex
	attempts map[types.UID]liveJob
}

// liveJob is what the collector remembers of a live manager Job: where it
// is (its mirrors have its namespace and name; the strings are the
// cache's own) and its dispatch attempt.
type liveJob struct {
	key     types.NamespacedName
	attempt int
}

func newLiveJobs() *liveJobs {
	return &liveJobs{attempts: map[types.UID]liveJob{}}
}

// attempt is the live Job's place and dispatch attempt; false when no
// such Job is live (gone, or being deleted).
func (l *liveJobs) attempt(uid types.UID) (liveJob, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	a, ok := l.attempts[uid]
	return a, ok
}

// set records the Job as it is now.
func (l *liveJobs) set(obj any) {
	job, ok := managercache.JobWithoutTemplate(obj)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	attempt, live := liveAttemptOf(&job)
	if !live {
		delete(l.attempts, job.UID)
		return
	}
	l.attempts[job.UID] = liveJob{key: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, attempt: attempt}
}

// liveAttemptOf is the Job's dispatch attempt; false when it is being
// deleted (its mirrors are orphans then).
func liveAttemptOf(job *batchv1.Job) (int, bool) {
	if job.DeletionTimestamp != nil {
		return 0, false
	}
	return jobstate.Attempt(job), true
}

// remove forgets a deleted Job.
func (l *liveJobs) remove(obj any) {
	job, ok := managercache.JobWithoutTemplate(obj)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.attempts, job.UID)
}

// handler keeps l from the informer's events.
func (l *liveJobs) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    l.set,
		UpdateFunc: func(_, obj any) { l.set(obj) },
		DeleteFunc: l.remove,
	}
}
