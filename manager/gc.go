package manager

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/mirror"
)

// OrphanCollector deletes mirrors whose manager Job no longer exists: Jobs
// deleted while their worker was unreachable. It runs at start, every
// Interval, and whenever a worker (re)connects. It reads only caches: the
// manager's Jobs and each worker's mirrors of this installation.
type OrphanCollector struct {
	Client   client.Client
	Registry *Registry
	Interval time.Duration
}

// SetupWithManager runs the collector on the leader, and on every reconnect.
func (gc *OrphanCollector) SetupWithManager(mgr ctrl.Manager) error {
	gc.Registry.onConnected = func(worker string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		gc.collect(ctx, worker)
	}
	return mgr.Add(gc)
}

// Start runs the periodic collection until ctx ends; an Interval of 0 or less
// collects only at start and on reconnects.
func (gc *OrphanCollector) Start(ctx context.Context) error {
	for {
		for _, worker := range gc.Registry.names() {
			gc.collect(ctx, worker)
		}
		if gc.Interval <= 0 {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(gc.Interval):
		}
	}
}

// collect deletes the orphaned mirrors on one connected worker.
func (gc *OrphanCollector) collect(ctx context.Context, worker string) {
	log := logf.FromContext(ctx).WithValues("worker", worker)
	rem := gc.Registry.remote(worker)
	if rem == nil || !rem.connected() {
		return
	}
	var mirrors batchv1.JobList
	if err := rem.client().List(ctx, &mirrors); err != nil {
		log.Error(err, "listing mirrors for garbage collection")
		return
	}
	if len(mirrors.Items) == 0 {
		orphanScans.WithLabelValues(worker).Inc()
		return
	}
	var jobs batchv1.JobList
	if err := gc.Client.List(ctx, &jobs, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "listing manager Jobs for garbage collection")
		return
	}
	defer orphanScans.WithLabelValues(worker).Inc()
	live := map[types.UID]*batchv1.Job{}
	for i := range jobs.Items {
		if jobs.Items[i].DeletionTimestamp == nil {
			live[jobs.Items[i].UID] = &jobs.Items[i]
		}
	}
	for i := range mirrors.Items {
		m := &mirrors.Items[i]
		origin := types.UID(m.Labels[v1alpha1.OriginUIDLabel])
		if origin == "" || m.DeletionTimestamp != nil || !mayDelete(m, gc.Registry.ManagerID, rem.originShared()) {
			continue
		}
		// A mirror of a live Job is kept unless a later attempt replaced it
		// (fencing after a worker loss). A mirror newer than the cached Job
		// only means the cache lags.
		if job := live[origin]; job != nil && mirror.Attempt(m) >= jobstate.Attempt(job) {
			continue
		}
		deleted, err := deleteMirror(ctx, rem, worker, m)
		if err != nil {
			log.Error(err, "deleting orphaned mirror", "mirror", client.ObjectKeyFromObject(m))
			continue
		}
		if !deleted {
			continue
		}
		orphansDeleted.WithLabelValues(worker).Inc()
		log.Info("deleted orphaned mirror", "mirror", client.ObjectKeyFromObject(m), "originUID", origin)
	}
}
