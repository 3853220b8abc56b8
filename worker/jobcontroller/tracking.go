package jobcontroller

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// trackStatusAndRemoveFinalizers records finished pods in the order that
// makes them impossible to lose or count twice: UIDs into
// uncountedTerminatedPods (write #1), finalizers off, UIDs into the counters
// (write #2), and the final condition only once nothing is uncounted or
// terminating.
func (r *Reconciler) trackStatusAndRemoveFinalizers(ctx context.Context, s *syncState, needsWrite bool) error {
	job := s.job
	now := r.Clock.Now()
	indexed := isIndexed(job)
	uncounted := job.Status.UncountedTerminatedPods

	withFinalizer := sets.New[types.UID]()
	for _, p := range s.pods {
		if hasTrackingFinalizer(p) && !s.expectedRmFinalizers.Has(p.UID) {
			withFinalizer.Insert(p.UID)
		}
	}
	before := *job.Status.DeepCopy()
	if moveUncountedWithoutFinalizers(&job.Status, withFinalizer) {
		needsWrite = true
	}

	rel := releasable(s, uncounted)
	if rel.counted {
		needsWrite = true
	}
	if indexed && s.showIndexes(rel.succeededIndexes) {
		needsWrite = true
	}
	if s.writeInterimCondition(now) {
		needsWrite = true
	}

	needsWrite, err := r.flushAndRemoveFinalizers(ctx, s, rel.pods, withFinalizer, &before, needsWrite, rel.policyActions)
	if err != nil {
		return err
	}
	finishing := !rel.reachedMax && enactFinished(job, s.finished, s.terminating)
	if !needsWrite && !finishing {
		return nil
	}
	if err := r.writeStatus(ctx, job); err != nil {
		return fmt.Errorf("writing counters: %w", err)
	}
	if finishing {
		r.recordFinished(job, s.finished)
		r.finishedWritten.Store(job.UID, struct{}{})
	}
	recordPodsFinished(job, before)
	return nil
}

// released is what the finished pods a sync looks at come to: those whose
// finalizer goes, the indexes newly succeeded, what the pod failure
// policy's rules did, whether any pod was newly counted (into uncounted,
// or an index), and whether maxUncountedPods was reached (the rest waits
// for the next sync, which the write triggers).
type released struct {
	pods             []*corev1.Pod
	succeededIndexes []int
	policyActions    map[batchv1.PodFailurePolicyAction]int
	counted          bool
	reachedMax       bool
}

// releasable picks the pods whose finalizer goes, in tracking order, and
// adds the newly finished ones to uncounted (or, indexed, to the indexes
// succeeded).
func releasable(s *syncState, uncounted *batchv1.UncountedTerminatedPods) released {
	job := s.job
	indexed := isIndexed(job)
	completions := int(ptr.Deref(job.Spec.Completions, 0))
	rel := released{policyActions: map[batchv1.PodFailurePolicyAction]int{}}
	for _, p := range sortedForTracking(s.pods, indexed) {
		if !hasTrackingFinalizer(p) || s.expectedRmFinalizers.Has(p.UID) {
			continue
		}
		failed := isPodFailed(p, job)
		if !(job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == corev1.PodSucceeded || failed) {
			continue
		}
		if d := s.delayedDeletion[completionIndex(p)]; d != nil && d.UID == p.UID && job.DeletionTimestamp == nil && s.finished == nil &&
			p.Status.Phase != corev1.PodSucceeded && !s.namespaceTerminating {
			// Kept until its replacement carries its failure count.
			continue
		}
		rel.pods = append(rel.pods, p)
		ix := completionIndex(p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedFailed.Has(p.UID):
			if indexed {
				if ix != unknownIndex && ix < completions && !s.prevSucceededIndexes.Has(ix) {
					rel.succeededIndexes = append(rel.succeededIndexes, ix)
					rel.counted = true
				}
			} else if !s.uncountedSucceeded.Has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				rel.counted = true
			}
		case failed || (s.finished != nil && s.finished.Type != batchv1.JobSuccessCriteriaMet && s.finished.Type != batchv1.JobComplete):
			if !s.uncountedFailed.Has(p.UID) && (!indexed || (ix != unknownIndex && ix < completions)) {
				// An Ignore rule releases the pod without counting it.
				m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
				if m.action != "" {
					rel.policyActions[m.action]++
				}
				if m.countFailed {
					uncounted.Failed = append(uncounted.Failed, p.UID)
					rel.counted = true
				}
			}
		}
		if len(rel.succeededIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= maxUncountedPods {
			// The rest waits for the next sync, which this write triggers.
			rel.reachedMax = true
			break
		}
	}
	return rel
}

// showIndexes writes the indexes succeeded (with those newly succeeded)
// and failed into an indexed Job's status; true when that changed it.
func (s *syncState) showIndexes(newlySucceeded []int) bool {
	job := s.job
	changed := false
	s.succeededIndexes = s.succeededIndexes.WithIndexes(sortedInts(newlySucceeded))
	if str := s.succeededIndexes.String(); str != job.Status.CompletedIndexes {
		job.Status.CompletedIndexes = str
		changed = true
	}
	job.Status.Succeeded = int32(s.succeededIndexes.Total())
	var failedIndexes *string
	if s.failedIndexes != nil {
		failedIndexes = ptr.To(s.failedIndexes.String())
	}
	if !ptr.Equal(job.Status.FailedIndexes, failedIndexes) {
		job.Status.FailedIndexes = failedIndexes
		changed = true
	}
	return changed
}

// writeInterimCondition adds the interim condition (FailureTarget,
// SuccessCriteriaMet) the sync decided to the status, before any finalizer
// goes, so a restart finds the decision already made; s.finished becomes
// the final one. True when the status changed.
func (s *syncState) writeInterimCondition(now time.Time) bool {
	job := s.job
	changed := false
	if s.finished != nil && s.finished.Type == batchv1.JobFailureTarget {
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		changed = true
		s.finished = newCondition(batchv1.JobFailed, s.finished.Reason, s.finished.Message, now)
	}
	if s.finished != nil && s.finished.Type == batchv1.JobSuccessCriteriaMet {
		if findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			changed = true
		}
		s.finished = newCondition(batchv1.JobComplete, s.finished.Reason, s.finished.Message, now)
	}
	return changed
}

// flushAndRemoveFinalizers writes the new uncounted UIDs, removes the
// finalizers of the pods to release, and moves the released UIDs into the
// counters (written by the caller, or here at once if a removal failed).
func (r *Reconciler) flushAndRemoveFinalizers(ctx context.Context, s *syncState, release []*corev1.Pod, withFinalizer sets.Set[types.UID], before *batchv1.JobStatus, needsWrite bool, policyActions map[batchv1.PodFailurePolicyAction]int) (bool, error) {
	job := s.job
	if needsWrite {
		if err := r.writeStatus(ctx, job); err != nil {
			return needsWrite, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		r.backoff.set(s.key, s.backoff)
		recordPodsFinished(job, *before)
		*before = *job.Status.DeepCopy()
		needsWrite = false
	}
	for action, n := range policyActions {
		podFailuresHandledByPolicyTotal.WithLabelValues(string(action)).Add(float64(n))
	}
	var rmErr error
	if len(release) > 0 {
		var released []bool
		released, rmErr = r.removeFinalizers(ctx, s.key, release)
		for i, p := range release {
			if released[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if moveUncountedWithoutFinalizers(&job.Status, withFinalizer) {
		needsWrite = true
	}
	if rmErr != nil && needsWrite {
		if err := r.writeStatus(ctx, job); err != nil {
			return needsWrite, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return needsWrite, rmErr
}

// removeFinalizers strips the tracking finalizer from pods in parallel,
// expecting the removals first so the next sync does not count them again.
func (r *Reconciler) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) ([]bool, error) {
	released := make([]bool, len(pods))
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	r.finalizerExpectations.expectRemoved(key, uids)
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			if err := r.removeTrackingFinalizer(ctx, pod); err != nil {
				r.finalizerExpectations.observed(key, pod.UID)
				if !apierrors.IsNotFound(err) {
					errOnce.Do(func() { firstErr = fmt.Errorf("removing tracking finalizer of %s: %w", pod.Name, err) })
					return
				}
			}
			released[i] = true
		})
	}
	wg.Wait()
	return released, firstErr
}

// moveUncountedWithoutFinalizers moves uncounted UIDs whose pod no longer has
// the finalizer (or is gone) into the succeeded and failed counters.
func moveUncountedWithoutFinalizers(status *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := status.UncountedTerminatedPods
	keepSucceeded := keepUIDs(u.Succeeded, withFinalizer)
	keepFailed := keepUIDs(u.Failed, withFinalizer)
	changed := len(keepSucceeded) != len(u.Succeeded) || len(keepFailed) != len(u.Failed)
	status.Succeeded += int32(len(u.Succeeded) - len(keepSucceeded))
	status.Failed += int32(len(u.Failed) - len(keepFailed))
	u.Succeeded, u.Failed = keepSucceeded, keepFailed
	return changed
}

func keepUIDs(uids []types.UID, keep sets.Set[types.UID]) []types.UID {
	var out []types.UID
	for _, uid := range uids {
		if keep.Has(uid) {
			out = append(out, uid)
		}
	}
	return out
}

// enactFinished sets the final condition once no pod is uncounted or
// terminating; Complete carries the completion time.
func enactFinished(job *batchv1.Job, finished *batchv1.JobCondition, terminating int32) bool {
	if finished == nil {
		return false
	}
	if u := job.Status.UncountedTerminatedPods; len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if terminating > 0 {
		return false
	}
	job.Status.Conditions, _ = ensureCondition(job.Status.Conditions, finished.Type, finished.Status, finished.Reason, finished.Message, finished.LastTransitionTime.Time)
	if finished.Type == batchv1.JobComplete {
		job.Status.CompletionTime = ptr.To(finished.LastTransitionTime)
	}
	return true
}

func (r *Reconciler) writeStatus(ctx context.Context, job *batchv1.Job) error {
	if err := r.Client.Status().Update(ctx, job); err != nil {
		return err
	}
	r.written.wrote(job.UID, job.ResourceVersion)
	return nil
}
