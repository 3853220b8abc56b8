package jobcontroller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobindex"
)

// Caps of one sync, as upstream: at most this many UIDs in each
// uncountedTerminatedPods write, and pod creations or deletions per sync.
const (
	maxUncountedPods          = 500
	maxPodCreateDeletePerSync = 500
)

// syncState is what one sync of a Job knows: the Job being written (a copy of
// the cached one), its pods and the counts derived from them.
type syncState struct {
	job  *batchv1.Job
	key  string
	pods []*corev1.Pod

	active      []*corev1.Pod
	ready       int32
	terminating int32

	uncountedSucceeded, uncountedFailed sets.Set[types.UID]
	expectedRmFinalizers                sets.Set[types.UID]

	succeeded, failed int32
	// finished is the condition the Job is heading to: FailureTarget or
	// SuccessCriteriaMet first, Failed or Complete once nothing is left.
	finished *batchv1.JobCondition

	prevSucceededIndexes, succeededIndexes jobindex.Intervals
	// failedIndexes is set only with backoffLimitPerIndex, as is
	// delayedDeletion: per index, the failed pod its replacement inherits
	// the failure count from.
	failedIndexes   *jobindex.Intervals
	delayedDeletion map[int]*corev1.Pod
	backoff         backoffRecord
	// namespaceTerminating: a pod create was refused because the Job's
	// namespace is being deleted. No replacement will ever inherit a
	// failure count there, so the pods delayedDeletion holds are released:
	// holding them would hold the namespace's deletion, which waits for its
	// pods before it deletes the Job, for ever.
	namespaceTerminating bool
}

// syncJob is one pass of the upstream syncJob: count, decide the terminal
// condition, create or delete pods, then record finished pods in status and
// release their finalizers. It returns the metrics action and when to look
// again even without events (deadline, back-off).
func (r *Reconciler) syncJob(ctx context.Context, cached *batchv1.Job, key string) (action string, requeueAfter time.Duration, err error) {
	job := cached.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	now := r.Clock.Now()
	action = actionReconciling

	// Expectations first: a pod created after this check is only missed
	// until its event, never counted short.
	satisfied := r.podExpectations.satisfied(key)
	pods, err := r.podsOf(ctx, job)
	if err != nil {
		return action, 0, err
	}
	s := &syncState{
		job:                  job,
		key:                  key,
		pods:                 pods,
		active:               filterPods(pods, isActive),
		terminating:          countPods(pods, isTerminating),
		uncountedSucceeded:   sets.New(job.Status.UncountedTerminatedPods.Succeeded...),
		uncountedFailed:      sets.New(job.Status.UncountedTerminatedPods.Failed...),
		expectedRmFinalizers: r.finalizerExpectations.expected(key),
	}
	s.ready = countPods(s.active, isReady)
	active := int32(len(s.active))
	newSucceeded, newFailed := s.newFinishedPods()
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(s.uncountedSucceeded.Len())
	s.failed = job.Status.Failed + countedFailures(job, newFailed) + int32(s.uncountedFailed.Len())

	if job.Status.StartTime == nil && !suspended(job) {
		job.Status.StartTime = ptr.To(metav1.NewTime(now))
	}
	s.backoff = nextBackoffRecord(r.backoff.get(key), newSucceeded, newFailed)

	s.finished, requeueAfter = r.pendingTerminalCondition(s, now)
	if isIndexed(job) {
		s.indexedProgress(now)
	}

	var manageErr error
	suspendChanged := false
	if s.finished != nil {
		// Heading to a terminal condition: stop what still runs, keeping the
		// finalizers so the stopped pods are counted.
		deletedReady, deleted, err := r.deleteActivePods(ctx, job, s.active)
		if deleted != active || !satisfied {
			// Pods the cache does not show yet could still hold finalizers.
			s.finished = nil
		}
		active -= deleted
		s.terminating += deleted
		s.ready -= deletedReady
		manageErr = err
	} else {
		manageCalled := false
		if satisfied && job.DeletionTimestamp == nil {
			var wait time.Duration
			active, action, wait, manageErr = r.manageJob(ctx, s, now)
			requeueAfter = earliest(requeueAfter, wait)
			manageCalled = true
		}
		if completionsReached(job, s.succeeded, active) {
			s.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		} else if manageCalled {
			suspendChanged = r.updateSuspendedCondition(job, now)
		}
	}

	needsWrite := suspendChanged || active != job.Status.Active || !ptr.Equal(&s.ready, job.Status.Ready) ||
		!ptr.Equal(job.Status.Terminating, &s.terminating)
	job.Status.Active = active
	job.Status.Ready = ptr.To(s.ready)
	job.Status.Terminating = ptr.To(s.terminating)
	if err := r.trackStatusAndRemoveFinalizers(ctx, s, needsWrite); err != nil {
		return action, 0, fmt.Errorf("tracking status of %s: %w", key, err)
	}
	return action, requeueAfter, manageErr
}

// indexedProgress reads an Indexed Job's progress from its status and pods:
// the indexes succeeded before and now, the indexes failed (with a back-off
// limit per index, and the pods whose deletion waits for their replacement),
// and the terminal condition the indexes reach, when the sync has not
// decided one already (s.finished).
func (s *syncState) indexedProgress(now time.Time) {
	job := s.job
	completions := int(ptr.Deref(job.Spec.Completions, 0))
	s.prevSucceededIndexes = jobindex.Parse(job.Status.CompletedIndexes, completions)
	s.succeededIndexes = s.prevSucceededIndexes.WithIndexes(indexesOf(filterPods(s.pods, func(p *corev1.Pod) bool {
		ix := completionIndex(p)
		return p.Status.Phase == corev1.PodSucceeded && ix != unknownIndex && ix < completions && hasTrackingFinalizer(p)
	})))
	s.succeeded = int32(s.succeededIndexes.Total())
	if hasBackoffLimitPerIndex(job) {
		failed := failedIndexesOf(job, s.pods)
		s.failedIndexes = &failed
		if s.finished == nil {
			if job.Spec.MaxFailedIndexes != nil && failed.Total() > int(*job.Spec.MaxFailedIndexes) {
				s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
			} else if failed.Total() > 0 && failed.Total()+s.succeededIndexes.Total() >= completions {
				s.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
			}
		}
		s.delayedDeletion = podsWithDelayedDeletion(s, failed)
	}
	if s.finished == nil {
		if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, completions, s.succeededIndexes); met {
			s.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, now)
		}
	}
}

// newFinishedPods are the pods that finished and are not yet recorded: they
// still hold the finalizer, are not in uncountedTerminatedPods and are not
// waiting for a finalizer removal we already made.
func (s *syncState) newFinishedPods() (succeeded, failed []*corev1.Pod) {
	valid := func(p *corev1.Pod, uncounted sets.Set[types.UID]) bool {
		if !hasTrackingFinalizer(p) || uncounted.Has(p.UID) || s.expectedRmFinalizers.Has(p.UID) {
			return false
		}
		if isIndexed(s.job) {
			ix := completionIndex(p)
			return ix != unknownIndex && ix < int(ptr.Deref(s.job.Spec.Completions, 0))
		}
		return true
	}
	for _, p := range s.pods {
		if valid(p, s.uncountedSucceeded) && p.Status.Phase == corev1.PodSucceeded {
			succeeded = append(succeeded, p)
		}
		if valid(p, s.uncountedFailed) && isPodFailed(p, s.job) {
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

// pendingTerminalCondition decides, in upstream order, whether the Job is
// heading to a terminal condition: one already recorded, a FailJob rule of
// the podFailurePolicy, the backoff limit, the active deadline. Without one, it returns when the deadline will pass.
func (r *Reconciler) pendingTerminalCondition(s *syncState, now time.Time) (*batchv1.JobCondition, time.Duration) {
	job := s.job
	if c := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
		return c.DeepCopy(), 0
	}
	if c := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); c != nil && c.Status == corev1.ConditionTrue {
		return newCondition(batchv1.JobFailed, c.Reason, c.Message, now), 0
	}
	if msg := failJobMessage(job, s.pods); msg != "" {
		return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, msg, now), 0
	}
	if s.failed > ptr.Deref(job.Spec.BackoffLimit, 6) || pastBackoffLimitOnFailure(job, s.pods) {
		return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now), 0
	}
	if job.Spec.ActiveDeadlineSeconds != nil && job.Status.StartTime != nil && !suspended(job) {
		left := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time)
		if left <= 0 {
			return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now), 0
		}
		return nil, left
	}
	return nil, 0
}

func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	restarts := restartsOnFailure(pods)
	limit := ptr.Deref(job.Spec.BackoffLimit, 6)
	if limit == 0 {
		return restarts > 0
	}
	return restarts >= limit
}

// completionsReached: without completions, any success once nothing runs;
// with them, enough successes and nothing running.
func completionsReached(job *batchv1.Job, succeeded, active int32) bool {
	if job.Spec.Completions == nil {
		return succeeded > 0 && active == 0
	}
	return succeeded >= *job.Spec.Completions && active == 0
}

// updateSuspendedCondition keeps the Suspended condition in step with
// spec.suspend, clearing startTime on suspend and restarting it on resume
// (the active deadline counts continuous running time).
func (r *Reconciler) updateSuspendedCondition(job *batchv1.Job, now time.Time) bool {
	if suspended(job) {
		var changed bool
		job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
		if changed {
			r.Recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
			job.Status.StartTime = nil
		}
		return changed
	}
	var changed bool
	job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
	if changed {
		r.Recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
		job.Status.StartTime = ptr.To(metav1.NewTime(now))
	}
	return changed
}

// manageJob creates or deletes pods so that the active ones match what the
// Job still needs. It returns the active count after its writes, the metrics
// action, and the back-off wait when creation is held back.
func (r *Reconciler) manageJob(ctx context.Context, s *syncState, now time.Time) (int32, string, time.Duration, error) {
	job := s.job
	active := int32(len(s.active))
	if suspended(job) {
		toDelete := podsForRemoval(job, s.active, int(active))
		r.podExpectations.expect(s.key, 0, len(toDelete))
		deletedReady, deleted, err := r.deleteJobPods(ctx, job, s.key, toDelete)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, actionPodsDeleted, 0, err
	}

	want := wantActive(job, s.succeeded, active)
	toDelete := podsForRemoval(job, s.active, int(max(active-want, 0)))
	if len(toDelete) > maxPodCreateDeletePerSync {
		toDelete = toDelete[:maxPodCreateDeletePerSync]
	}
	if len(toDelete) > 0 {
		r.podExpectations.expect(s.key, 0, len(toDelete))
		deletedReady, deleted, err := r.deleteJobPods(ctx, job, s.key, toDelete)
		s.terminating += deleted
		s.ready -= deletedReady
		return active - deleted, actionPodsDeleted, 0, err
	}

	var terminating int32
	if onlyReplaceFailedPods(job) {
		terminating = s.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, actionTracking, 0, nil
	}
	// With backoffLimitPerIndex each index has its own back-off instead.
	if wait := s.backoff.remaining(now); wait > 0 && !hasBackoffLimitPerIndex(job) {
		return active, actionPodsCreated, max(wait, syncBatchPeriod), nil
	}
	diff = min(diff, maxPodCreateDeletePerSync)
	var indexes []int
	if isIndexed(job) {
		holding := s.active
		if onlyReplaceFailedPods(job) {
			holding = append(holding[:len(holding):len(holding)], filterPods(s.pods, isTerminating)...)
		}
		done := s.succeededIndexes
		if s.failedIndexes != nil {
			done = done.Merge(*s.failedIndexes)
		}
		indexes = firstPendingIndexes(int(diff), int(ptr.Deref(job.Spec.Completions, 0)), done, holding)
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			if indexes, wait = readyIndexes(indexes, s.delayedDeletion, now); len(indexes) == 0 && wait > 0 {
				return active, actionPodsCreated, max(wait, syncBatchPeriod), nil
			}
		}
		diff = int32(len(indexes))
	}
	created, err := r.createPods(ctx, s, diff, indexes)
	return active + created, actionPodsCreated, 0, err
}

// wantActive is how many pods should run: parallelism, capped by the
// completions still missing; without completions, none once one succeeded
// (but the running ones are left to finish).
func wantActive(job *batchv1.Job, succeeded, active int32) int32 {
	parallelism := ptr.Deref(job.Spec.Parallelism, 1)
	if job.Spec.Completions == nil {
		if succeeded > 0 {
			return active
		}
		return parallelism
	}
	return max(min(*job.Spec.Completions-succeeded, parallelism), 0)
}

func suspended(job *batchv1.Job) bool { return ptr.Deref(job.Spec.Suspend, false) }

func earliest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
