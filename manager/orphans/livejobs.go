package orphans

import (
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
// from the cache's Job events (managercache.Index). A collection looks
// mirrors up in it instead of listing every manager Job: at 100,000 Jobs
// that list copied 130 MB every collection and was a tenth of all the
// manager allocated.
//
// It holds one entry per cached Job, and is complete only once its
// registration has synced (every Job in the cache when it registered
// delivered): before, a missing Job would be taken for a gone one.
type liveJobs = managercache.Index[liveJob]

// liveJob is what the collector remembers of a live manager Job: where it
// is (its mirrors have its namespace and name; the strings are the
// cache's own) and its dispatch attempt.
type liveJob struct {
	key     types.NamespacedName
	attempt int
}

func newLiveJobs() *liveJobs {
	return managercache.NewIndex(func(job *batchv1.Job) (liveJob, bool) {
		attempt, live := liveAttemptOf(job)
		return liveJob{key: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, attempt: attempt}, live
	})
}

// liveAttemptOf is the Job's dispatch attempt; false when it is being
// deleted (its mirrors are orphans then).
func liveAttemptOf(job *batchv1.Job) (int, bool) {
	if job.DeletionTimestamp != nil {
		return 0, false
	}
	return jobstate.Attempt(job), true
}
