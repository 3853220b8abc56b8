package workercluster

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/managercache"
)

// jobCounts is what the tally counts a manager Job by (jobTally; countsIn
// adds up a worker's DISPATCHED and RUNNING columns): the worker it is
// placed on, whether it is unfinished, whether a pod of it is active.
type jobCounts struct {
	worker             string
	unfinished, active bool
}

// countsOf is the counts of obj, an object of the manager cluster's Job
// cache (managercache.JobWithoutTemplate); none for anything but a manager
// Job.
func countsOf(obj client.Object) jobCounts {
	job, ok := managercache.JobWithoutTemplate(obj)
	if !ok {
		return jobCounts{}
	}
	return countsOfJob(&job)
}

// countsOfJob is what a Job adds: none for anything but a manager Job.
func countsOfJob(job *batchv1.Job) jobCounts {
	if !v1alpha1.IsManagerJob(job) {
		return jobCounts{}
	}
	return jobCounts{worker: job.Annotations[v1alpha1.WorkerAnnotation], unfinished: !jobstatus.Finished(job.Status), active: job.Status.Active > 0}
}

// jobCountsHandler has the WorkerCluster controller follow the manager Jobs
// themselves, whoever changed them: each event moves the Job in the tally,
// and a Job placed on a worker or released from it, started, finished or
// deleted asks for that worker's reconcile countsRefresh later. The work queue keeps one such request per worker,
// so a burst of Job changes refreshes the counts once. Only a worker that
// is a WorkerCluster (in the cache, reader) is asked for: the worker
// annotation of a Job is what its writer says, and a reconcile of a
// WorkerCluster that does not exist takes it for one just deleted.
type jobCountsHandler struct {
	reader client.Reader
	tally  *jobTally
}

var _ handler.EventHandler = jobCountsHandler{}

func (h jobCountsHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c := countsOf(e.Object)
	h.tally.MoveKey(jobCounts{}, false, c, c.counted())
	h.refresh(ctx, q, c)
}

func (h jobCountsHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	before, after := countsOf(e.ObjectOld), countsOf(e.ObjectNew)
	if before == after {
		return
	}
	// The keys read once: every Job event of the manager comes here.
	h.tally.MoveKey(before, before.counted(), after, after.counted())
	h.refresh(ctx, q, before)
	if after.worker != before.worker {
		h.refresh(ctx, q, after)
	}
}

func (h jobCountsHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c := countsOf(e.Object)
	h.tally.MoveKey(c, c.counted(), jobCounts{}, false)
	h.refresh(ctx, q, c)
}

func (jobCountsHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// refresh asks for a reconcile of the Job's worker, countsRefresh from now
// (or sooner, if one is due sooner), when it is a WorkerCluster.
func (h jobCountsHandler) refresh(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], c jobCounts) {
	if c.worker == "" {
		return
	}
	// Its metadata only (a cache of WorkerClusters' metadata of its own): a
	// Get of the WorkerCluster would copy the worker's whole status, and a
	// list of the cache's own (no copies) a WorkerCluster struct for each
	// worker, at every Job event.
	wc := &metav1.PartialObjectMetadata{}
	wc.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("WorkerCluster"))
	if err := h.reader.Get(ctx, types.NamespacedName{Name: c.worker}, wc); err != nil {
		// Not one (or the cache cannot say): its own reconciles, every
		// health interval, read its counts anyway.
		return
	}
	q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: c.worker}}, countsRefresh)
}
