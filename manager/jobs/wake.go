package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/jobferry/jobferry/manager/metrics"
)

// wakeLoop wakes waiting Jobs whenever the pool says capacity or the
// workers changed; signals that arrive during a wake-up make one more.
func (r *JobReconciler) wakeLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.events.wake:
			if err := r.wake(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "waking Jobs waiting for room")
			}
		}
	}
}

// wake reads the waiting Jobs and the workers' room, asks toWake which fit
// now, and enqueues those.
func (r *JobReconciler) wake(ctx context.Context) error {
	room := r.placing.waiting
	queues := room.begin()
	if len(queues) == 0 {
		return nil
	}
	namespaces := map[string]*corev1.Namespace{}
	// heads holds each shape's first Job, read for its workers' view and
	// served to toWake from here rather than read again.
	heads := map[types.NamespacedName]*batchv1.Job{}
	shapes := make([]waitingShape, 0, len(queues))
	for _, keys := range queues {
		ns, ok := namespaces[keys[0].Namespace]
		if !ok {
			var err error
			if ns, err = r.namespaces().Get(ctx, keys[0].Namespace); err != nil {
				return err
			}
			namespaces[keys[0].Namespace] = ns
		}
		head := &batchv1.Job{}
		if err := r.Client.Get(ctx, keys[0], head); err != nil {
			if apierrors.IsNotFound(err) {
				room.remove(keys[0])
				// The rest of its shape is looked at in the next wake-up.
				r.wakeWaiting()
				continue
			}
			return fmt.Errorf("reading waiting Job %s: %w", keys[0], err)
		}
		heads[keys[0]] = head
		r.placing.mu.Lock()
		workers, err := r.workerViews(ctx, head, ns)
		r.placing.mu.Unlock()
		if err != nil {
			return err
		}
		shapes = append(shapes, waitingShape{Jobs: keys, Workers: workers})
	}
	var lookupErr error
	lookup := func(key types.NamespacedName) *batchv1.Job {
		if head, ok := heads[key]; ok {
			return head
		}
		job := &batchv1.Job{}
		if err := r.Client.Get(ctx, key, job); err != nil {
			if !apierrors.IsNotFound(err) && lookupErr == nil {
				lookupErr = fmt.Errorf("reading waiting Job %s: %w", key, err)
			}
			return nil
		}
		return job
	}
	wake, drop := toWake(shapes, lookup)
	if lookupErr != nil {
		return lookupErr
	}
	for _, key := range drop {
		room.remove(key)
	}
	for _, key := range wake {
		room.remove(key)
		r.enqueue(key.Namespace, key.Name)
	}
	metrics.JobsWoken.Add(float64(len(wake)))
	return nil
}
