package jobcontroller

import (
	"maps"
	"slices"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobpods"
)

func hasTrackingFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// isActive: neither terminal nor being deleted.
func isActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// isTerminating: being deleted and not yet terminal.
func isTerminating(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp != nil
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onlyReplaceFailedPods: under podReplacementPolicy Failed a terminating pod
// is neither replaced nor counted failed until its phase is Failed.
func onlyReplaceFailedPods(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.PodReplacementPolicy, batchv1.TerminatingOrFailed) == batchv1.Failed || job.Spec.PodFailurePolicy != nil
}

// isPodFailed: phase Failed, or (under TerminatingOrFailed) deleted before it
// succeeded.
func isPodFailed(pod *corev1.Pod, job *batchv1.Job) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(job) {
		return false
	}
	return pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded
}

func filterPods(pods []*corev1.Pod, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func countPods(pods []*corev1.Pod, match func(*corev1.Pod) bool) int32 {
	var n int32
	for _, p := range pods {
		if match(p) {
			n++
		}
	}
	return n
}

// finishedTime is when a pod stopped, as the upstream back-off reads it: the
// last container termination, else the Ready=False transition, else the
// deletion time minus its grace period, else its creation.
func finishedTime(pod *corev1.Pod) time.Time {
	var latest *time.Time
	containersDone := len(pod.Status.ContainerStatuses) > 0
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.FinishedAt.IsZero() {
			containersDone = false
			break
		}
		if t := cs.State.Terminated.FinishedAt.Time; latest == nil || latest.Before(t) {
			latest = &t
		}
	}
	if containersDone && latest != nil {
		return *latest
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil {
		return pod.DeletionTimestamp.Add(-time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second)
	}
	return pod.CreationTimestamp.Time
}

// podsForRemoval picks at least n active pods to delete: for Indexed Jobs
// first the duplicates of an index and indexes beyond completions, then the
// pods least far along (unscheduled, pending, not ready, newest), the order
// of the upstream ActivePods sort.
func podsForRemoval(job *batchv1.Job, active []*corev1.Pod, n int) []*corev1.Pod {
	var remove, left []*corev1.Pod
	if isIndexed(job) {
		remove, left = duplicateIndexPods(active, int(ptr.Deref(job.Spec.Completions, 0)))
	} else {
		left = slices.Clone(active)
	}
	if len(remove) < n {
		sort.SliceStable(left, func(i, j int) bool { return lessActive(left[i], left[j]) })
		remove = append(remove, left[:n-len(remove)]...)
	}
	return remove
}

// duplicateIndexPods splits pods into those to remove (out of range, or all
// but the most advanced pod of an index) and the rest.
func duplicateIndexPods(pods []*corev1.Pod, completions int) (remove, keep []*corev1.Pod) {
	byIndex := map[int][]*corev1.Pod{}
	for _, p := range pods {
		ix := completionIndex(p)
		if ix == unknownIndex || ix >= completions {
			remove = append(remove, p)
			continue
		}
		byIndex[ix] = append(byIndex[ix], p)
	}
	for _, ix := range slices.Sorted(maps.Keys(byIndex)) {
		same := byIndex[ix]
		sort.SliceStable(same, func(i, j int) bool { return lessActive(same[i], same[j]) })
		remove = append(remove, same[:len(same)-1]...)
		keep = append(keep, same[len(same)-1])
	}
	return remove, keep
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// lessActive orders pods the way the upstream ActivePods sort does, the one
// to delete first being the least: unscheduled, pending, not ready, ready
// for less time, more restarts, newer.
func lessActive(a, b *corev1.Pod) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if phaseOrder[a.Status.Phase] != phaseOrder[b.Status.Phase] {
		return phaseOrder[a.Status.Phase] < phaseOrder[b.Status.Phase]
	}
	if isReady(a) != isReady(b) {
		return !isReady(a)
	}
	if isReady(a) {
		// Ready for less time first.
		if ta, tb := readyTime(a), readyTime(b); !ta.Equal(tb) {
			return afterOrZero(ta, tb)
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(a.CreationTimestamp.Time, b.CreationTimestamp.Time)
	}
	return false
}

// afterOrZero: a is unset, or later than b (which is set).
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

func readyTime(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func maxRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n = max(n, cs.RestartCount)
	}
	return n
}

// restartsOnFailure sums container restarts of running and pending pods: with
// restartPolicy OnFailure they are the failures (pastBackoffLimitOnFailure).
func restartsOnFailure(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			n += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	return n
}

func isIndexed(job *batchv1.Job) bool { return jobpods.IsIndexed(job) }

func completionModeLabel(job *batchv1.Job) string {
	if isIndexed(job) {
		return string(batchv1.IndexedCompletion)
	}
	return string(batchv1.NonIndexedCompletion)
}
