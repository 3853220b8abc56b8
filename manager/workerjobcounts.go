package manager

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// jobCounts is what a manager Job adds to its worker's DISPATCHED and
// RUNNING columns (countJobs): the worker it is placed on, whether it is
// unfinished, whether a pod of it is active.
type jobCounts struct {
	worker             string
	unfinished, active bool
}

func countsOf(job *batchv1.Job) jobCounts {
	if job == nil || !v1alpha1.IsManagerJob(job) {
		return jobCounts{}
	}
	return jobCounts{worker: job.Annotations[v1alpha1.WorkerAnnotation], unfinished: !isFinished(job), active: job.Status.Active > 0}
}

// jobCountsHandler has the WorkerCluster controller follow the manager Jobs
// themselves, whoever changed them: a Job placed on a worker or released
// from it, started, finished or deleted asks for that worker's reconcile
// countsRefresh later. The work queue keeps one such request per worker,
// so a burst of Job changes refreshes the counts once.
type jobCountsHandler struct{}

var _ handler.EventHandler = jobCountsHandler{}

func (jobCountsHandler) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	refreshCounts(q, countsOf(asJob(e.Object)))
}

func (jobCountsHandler) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	before, after := countsOf(asJob(e.ObjectOld)), countsOf(asJob(e.ObjectNew))
	if before == after {
		return
	}
	refreshCounts(q, before)
	if after.worker != before.worker {
		refreshCounts(q, after)
	}
}

func (jobCountsHandler) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	refreshCounts(q, countsOf(asJob(e.Object)))
}

func (jobCountsHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// refreshCounts asks for a reconcile of the Job's worker, countsRefresh
// from now (or sooner, if one is due sooner).
func refreshCounts(q workqueue.TypedRateLimitingInterface[reconcile.Request], c jobCounts) {
	if c.worker == "" {
		return
	}
	q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: c.worker}}, countsRefresh)
}

// asJob is obj as a Job; nil when it is not one (a tombstone).
func asJob(obj client.Object) *batchv1.Job {
	job, _ := obj.(*batchv1.Job)
	return job
}
