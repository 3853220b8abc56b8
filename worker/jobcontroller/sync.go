package jobcontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

	prevSucceededIndexes, succeededIndexes intervals
	backoff                                backoffRecord
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
		completions := int(ptr.Deref(job.Spec.Completions, 0))
		s.prevSucceededIndexes = parseIntervals(job.Status.CompletedIndexes, completions)
		s.succeededIndexes = s.prevSucceededIndexes.withIndexes(indexesOf(filterPods(pods, func(p *corev1.Pod) bool {
			ix := completionIndex(p)
			return p.Status.Phase == corev1.PodSucceeded && ix != unknownIndex && ix < completions && hasTrackingFinalizer(p)
		})))
		s.succeeded = int32(s.succeededIndexes.total())
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
// heading to a terminal condition: one already recorded, an unsupported
// spec, a FailJob rule of the podFailurePolicy, the backoff limit, the
// active deadline. Without one, it returns when
// the deadline will pass.
func (r *Reconciler) pendingTerminalCondition(s *syncState, now time.Time) (*batchv1.JobCondition, time.Duration) {
	job := s.job
	if c := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
		return c.DeepCopy(), 0
	}
	if c := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); c != nil && c.Status == corev1.ConditionTrue {
		return newCondition(batchv1.JobFailed, c.Reason, c.Message, now), 0
	}
	if msg := unsupportedSpec(job); msg != "" {
		return newCondition(batchv1.JobFailureTarget, ReasonUnsupportedSpec, msg, now), 0
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
	if wait := s.backoff.remaining(now); wait > 0 {
		return active, actionPodsCreated, max(wait, syncBatchPeriod), nil
	}
	diff = min(diff, maxPodCreateDeletePerSync)
	var indexes []int
	if isIndexed(job) {
		holding := s.active
		if onlyReplaceFailedPods(job) {
			holding = append(holding[:len(holding):len(holding)], filterPods(s.pods, isTerminating)...)
		}
		indexes = firstPendingIndexes(int(diff), int(ptr.Deref(job.Spec.Completions, 0)), s.succeededIndexes, holding)
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

// createPods creates n pods (one per index for Indexed Jobs) in slow-start
// batches of 1, 2, 4, ...: after a failed batch the rest is not attempted, so
// a quota or webhook error costs one call, not hundreds.
func (r *Reconciler) createPods(ctx context.Context, s *syncState, n int32, indexes []int) (int32, error) {
	job := s.job
	r.podExpectations.expect(s.key, int(n), 0)
	template := podTemplate(job)
	var created, failedCreations atomic.Int32
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
			pod := newPod(job, template, ix)
			wg.Go(func() {
				err := r.Client.Create(ctx, pod)
				if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// The namespace is going away and the pods with it.
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

// podTemplate is the Job's pod template with the tracking finalizer and, for
// Indexed Jobs, the JOB_COMPLETION_INDEX variable in every container.
func podTemplate(job *batchv1.Job) *corev1.PodTemplateSpec {
	t := job.Spec.Template.DeepCopy()
	if isIndexed(job) {
		env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation),
		}}}
		addEnv := func(cs []corev1.Container) {
			for i := range cs {
				if !hasEnv(cs[i].Env, env.Name) {
					cs[i].Env = append(cs[i].Env, env)
				}
			}
		}
		addEnv(t.Spec.InitContainers)
		addEnv(t.Spec.Containers)
	}
	if !hasTrackingFinalizer(&corev1.Pod{ObjectMeta: t.ObjectMeta}) {
		t.Finalizers = append(t.Finalizers, batchv1.JobTrackingFinalizer)
	}
	return t
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// newPod builds one pod of the Job; index is unknownIndex for NonIndexed Jobs.
func newPod(job *batchv1.Job, t *corev1.PodTemplateSpec, index int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       job.Namespace,
			GenerateName:    job.Name + "-",
			Labels:          copyMap(t.Labels),
			Annotations:     copyMap(t.Annotations),
			Finalizers:      append([]string(nil), t.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if index != unknownIndex {
		ix := strconv.Itoa(index)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Annotations[batchv1.JobCompletionIndexAnnotation] = ix
		pod.Labels[batchv1.JobCompletionIndexAnnotation] = ix
		pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
		pod.GenerateName = generateNameWithIndex(job.Name, index)
	}
	return pod
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
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

// trackStatusAndRemoveFinalizers records finished pods in the order that
// makes them impossible to lose or count twice: UIDs into
// uncountedTerminatedPods (write #1), finalizers off, UIDs into the counters
// (write #2), and the final condition only once nothing is uncounted or
// terminating.
func (r *Reconciler) trackStatusAndRemoveFinalizers(ctx context.Context, s *syncState, needsWrite bool) error {
	job := s.job
	now := r.Clock.Now()
	indexed := isIndexed(job)
	completions := int(ptr.Deref(job.Spec.Completions, 0))
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

	var release []*corev1.Pod
	var newSucceededIndexes []int
	policyActions := map[batchv1.PodFailurePolicyAction]int{}
	reachedMax := false
	for _, p := range sortedForTracking(s.pods, indexed) {
		if !hasTrackingFinalizer(p) || s.expectedRmFinalizers.Has(p.UID) {
			continue
		}
		failed := isPodFailed(p, job)
		if !(job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == corev1.PodSucceeded || failed) {
			continue
		}
		release = append(release, p)
		ix := completionIndex(p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncountedFailed.Has(p.UID):
			if indexed {
				if ix != unknownIndex && ix < completions && !s.prevSucceededIndexes.has(ix) {
					newSucceededIndexes = append(newSucceededIndexes, ix)
					needsWrite = true
				}
			} else if !s.uncountedSucceeded.Has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				needsWrite = true
			}
		case failed || (s.finished != nil && s.finished.Type != batchv1.JobSuccessCriteriaMet && s.finished.Type != batchv1.JobComplete):
			if !s.uncountedFailed.Has(p.UID) && (!indexed || (ix != unknownIndex && ix < completions)) {
				// An Ignore rule releases the pod without counting it.
				m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
				if m.action != "" {
					policyActions[m.action]++
				}
				if m.countFailed {
					uncounted.Failed = append(uncounted.Failed, p.UID)
					needsWrite = true
				}
			}
		}
		if len(newSucceededIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= maxUncountedPods {
			// The rest waits for the next sync, which this write triggers.
			reachedMax = true
			break
		}
	}
	if indexed {
		s.succeededIndexes = s.succeededIndexes.withIndexes(sortedInts(newSucceededIndexes))
		if str := s.succeededIndexes.String(); str != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = str
			needsWrite = true
		}
		job.Status.Succeeded = int32(s.succeededIndexes.total())
	}
	// The interim condition is written before any finalizer goes, so a
	// restart finds the decision already made.
	if s.finished != nil && s.finished.Type == batchv1.JobFailureTarget {
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		needsWrite = true
		s.finished = newCondition(batchv1.JobFailed, s.finished.Reason, s.finished.Message, now)
	}
	if s.finished != nil && s.finished.Type == batchv1.JobSuccessCriteriaMet {
		if findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			needsWrite = true
		}
		s.finished = newCondition(batchv1.JobComplete, s.finished.Reason, s.finished.Message, now)
	}

	needsWrite, err := r.flushAndRemoveFinalizers(ctx, s, release, withFinalizer, &before, needsWrite, policyActions)
	if err != nil {
		return err
	}
	finishing := !reachedMax && enactFinished(job, s.finished, s.terminating)
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

func (r *Reconciler) recordFinished(job *batchv1.Job, c *batchv1.JobCondition) {
	mode := completionModeLabel(job)
	if c.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			r.Recorder.Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		r.Recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
		jobsFinishedTotal.WithLabelValues(mode, "succeeded", c.Reason).Inc()
		return
	}
	r.Recorder.Event(job, corev1.EventTypeWarning, c.Reason, c.Message)
	jobsFinishedTotal.WithLabelValues(mode, "failed", c.Reason).Inc()
}

func recordPodsFinished(job *batchv1.Job, before batchv1.JobStatus) {
	mode := completionModeLabel(job)
	var succeeded int
	if isIndexed(job) {
		completions := int(ptr.Deref(job.Spec.Completions, 0))
		if job.Status.CompletedIndexes != before.CompletedIndexes {
			succeeded = parseIntervals(job.Status.CompletedIndexes, completions).total() - parseIntervals(before.CompletedIndexes, completions).total()
		}
		finishedIndexesTotal.WithLabelValues("succeeded", "global").Add(float64(succeeded))
	} else {
		succeeded = int(job.Status.Succeeded - before.Succeeded)
	}
	podsFinishedTotal.WithLabelValues(mode, "succeeded").Add(float64(succeeded))
	podsFinishedTotal.WithLabelValues(mode, "failed").Add(float64(job.Status.Failed - before.Failed))
}

func recordPodsCreation(job *batchv1.Job, s *syncState, succeeded, failed int32) {
	reason := creationNew
	if ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed && s.failed > 0 {
		reason = creationRecreateFailed
	} else if s.failed > 0 || s.terminating > 0 {
		reason = creationRecreateTerminatingOrFailed
	}
	// Upstream counts every attempt as succeeded as well; we count each
	// attempt once, by its outcome.
	if n := succeeded; n > 0 {
		podsCreationTotal.WithLabelValues(reason, "succeeded").Add(float64(n))
	}
	if failed > 0 {
		podsCreationTotal.WithLabelValues(reason, "failed").Add(float64(failed))
	}
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
