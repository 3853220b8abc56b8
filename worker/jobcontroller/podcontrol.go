package jobcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jobferry/jobferry/internal/jobpods"
)

// createPods creates n pods (one per index for Indexed Jobs) in slow-start
// batches of 1, 2, 4, ...: after a failed batch the rest is not attempted, so
// a quota or webhook error costs one call, not hundreds.
func (r *Reconciler) createPods(ctx context.Context, s *syncState, n int32, indexes []int) (int32, error) {
	job := s.job
	r.podExpectations.expect(s.key, int(n), 0)
	template := jobpods.Template(job)
	var created, failedCreations atomic.Int32
	var namespaceTerminating atomic.Bool
	var firstErr error
	var errOnce sync.Once
	for batch := min(n, 1); n > 0; batch = min(2*batch, n) {
		var wg sync.WaitGroup
		var batchFailed atomic.Bool
		for range batch {
			ix := unknownIndex
			if len(indexes) > 0 {
				ix, indexes = indexes[0], indexes[1:]
			}
			pod := jobpods.New(job, template, ix)
			if hasBackoffLimitPerIndex(job) {
				inheritFailureCounts(job, pod, s.delayedDeletion[ix])
			}
			wg.Go(func() {
				err := r.Client.Create(ctx, pod)
				if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// The namespace is going away and the pods with it: no
					// error, and no pod to wait for (upstream waits for it
					// until its expectation expires, and meanwhile creates
					// nothing, which keeps delayed pods held: see
					// syncState.namespaceTerminating).
					r.podExpectations.observe(s.key, 1, 0)
					namespaceTerminating.Store(true)
					// Nor are the rest of this sync's creates tried.
					batchFailed.Store(true)
					return
				}
				if err != nil {
					r.podExpectations.observe(s.key, 1, 0)
					failedCreations.Add(1)
					batchFailed.Store(true)
					errOnce.Do(func() { firstErr = fmt.Errorf("creating pod for %s: %w", s.key, err) })
					r.Recorder.Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
					return
				}
				created.Add(1)
				r.Recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", pod.Name)
			})
		}
		wg.Wait()
		s.namespaceTerminating = s.namespaceTerminating || namespaceTerminating.Load()
		n -= batch
		if batchFailed.Load() && n > 0 {
			for range n {
				r.podExpectations.observe(s.key, 1, 0)
			}
			break
		}
	}
	recordPodsCreation(job, s, created.Load(), failedCreations.Load())
	return created.Load(), firstErr
}

// deleteJobPods deletes pods the controller no longer wants (suspend, too
// many running). Their finalizer goes first, so they are never counted as
// failed.
func (r *Reconciler) deleteJobPods(ctx context.Context, job *batchv1.Job, key string, pods []*corev1.Pod) (deletedReady, deleted int32, err error) {
	return r.deletePods(ctx, job, pods, func(pod *corev1.Pod) error {
		if hasTrackingFinalizer(pod) {
			if err := r.removeTrackingFinalizer(ctx, pod); err != nil {
				r.podExpectations.observe(key, 0, 1)
				return fmt.Errorf("removing tracking finalizer of %s before deleting it: %w", pod.Name, err)
			}
		}
		err := r.deletePod(ctx, job, pod)
		if err != nil {
			r.podExpectations.observe(key, 0, 1)
		}
		return err
	})
}

// deleteActivePods stops the running pods of a Job heading to a terminal
// condition, keeping their finalizers so they are counted.
func (r *Reconciler) deleteActivePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (deletedReady, deleted int32, err error) {
	return r.deletePods(ctx, job, pods, func(pod *corev1.Pod) error { return r.deletePod(ctx, job, pod) })
}

func (r *Reconciler) deletePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod, del func(*corev1.Pod) error) (int32, int32, error) {
	var ready, ok atomic.Int32
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			if err := del(pod); err != nil && !apierrors.IsNotFound(err) {
				errOnce.Do(func() { firstErr = err })
				return
			}
			ok.Add(1)
			if isReady(pod) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	return ready.Load(), ok.Load(), firstErr
}

func (r *Reconciler) deletePod(ctx context.Context, job *batchv1.Job, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	switch {
	case apierrors.IsNotFound(err):
		return err
	case err != nil:
		r.Recorder.Eventf(job, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	r.Recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", pod.Name)
	return nil
}

var removeTrackingFinalizerPatch = func() []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
	}})
	return b
}()

func (r *Reconciler) removeTrackingFinalizer(ctx context.Context, pod *corev1.Pod) error {
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	return r.Client.Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, removeTrackingFinalizerPatch))
}
