package workercluster

import (
	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobferry/jobferry/manager/managercache"
)

// jobTally is the WorkerCluster controller's memory of its workers' Job
// counts (the DISPATCHED and RUNNING columns): the unfinished manager Jobs
// placed on each worker, by whether a pod of them is active, kept from the
// manager-cluster cache's Job events (jobCountsHandler;
// managercache.Tally), so a reconcile reads a worker's counts without
// listing its Jobs — at 100,000 tracked Jobs over ten workers that list
// copied ~13 MB per worker every countsRefresh.
type jobTally = managercache.Tally[jobCounts]

// workerCounts are one worker's columns.
type workerCounts struct {
	dispatched, running int32
}

func newJobTally() *jobTally {
	return managercache.NewTally(func(job *batchv1.Job) (jobCounts, bool) {
		c := countsOfJob(job)
		return c, c.counted()
	})
}

// counted: the Job is in its worker's columns (placed, unfinished).
func (c jobCounts) counted() bool { return c.worker != "" && c.unfinished }

// countsIn are worker's columns in the tally now.
func countsIn(t *jobTally, worker string) workerCounts {
	n := t.Count(jobCounts{worker: worker, unfinished: true, active: true}, jobCounts{worker: worker, unfinished: true})
	running, idle := n[0], n[1]
	return workerCounts{dispatched: int32(running + idle), running: int32(running)}
}
