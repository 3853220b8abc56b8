package jobcontroller

import (
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobferry/jobferry/internal/jobindex"
)

// backoffLimitPerIndex (KEP-3850), as upstream: each index has its own
// failure count, carried from a failed pod to its replacement in the
// batch.kubernetes.io/job-index-failure-count annotation; an index whose
// pod fails with the count at the limit (or on a FailIndex rule) is failed
// for good, and the Job fails once too many indexes failed or every index is
// done with some failed. A failed pod keeps its finalizer until its
// replacement exists, so the count cannot be lost.

func hasBackoffLimitPerIndex(job *batchv1.Job) bool { return job.Spec.BackoffLimitPerIndex != nil }

func annotationCount(pod *corev1.Pod, key string) int32 {
	v, ok := pod.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

func indexFailureCount(pod *corev1.Pod) int32 {
	return annotationCount(pod, batchv1.JobIndexFailureCountAnnotation)
}

// absoluteIndexFailureCount also counts the failures an Ignore rule skipped:
// the per-index back-off grows with them too.
func absoluteIndexFailureCount(pod *corev1.Pod) int32 {
	return indexFailureCount(pod) + annotationCount(pod, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// isIndexFailed: the pod failed for good for its index.
func isIndexFailed(job *batchv1.Job, pod *corev1.Pod) bool {
	if !isPodFailed(pod, job) {
		return false
	}
	m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
	if m.action == batchv1.PodFailurePolicyActionFailIndex {
		return true
	}
	return m.countFailed && indexFailureCount(pod) >= *job.Spec.BackoffLimitPerIndex
}

// failedIndexesOf is status.failedIndexes plus the indexes of pods that
// failed for good and are not recorded yet.
func failedIndexesOf(job *batchv1.Job, pods []*corev1.Pod) jobindex.Intervals {
	completions := int(*job.Spec.Completions)
	var prev jobindex.Intervals
	if job.Status.FailedIndexes != nil {
		prev = jobindex.Parse(*job.Status.FailedIndexes, completions)
	}
	return prev.WithIndexes(indexesOf(filterPods(pods, func(p *corev1.Pod) bool {
		ix := completionIndex(p)
		return ix != unknownIndex && ix < completions && hasTrackingFinalizer(p) && isIndexFailed(job, p)
	})))
}

// podsWithDelayedDeletion are, per index still to run, the last failed pod
// (most failures, latest finish): it keeps its finalizer until the
// replacement that inherits its count exists.
func podsWithDelayedDeletion(s *syncState, failed jobindex.Intervals) map[int]*corev1.Pod {
	active := map[int]bool{}
	for _, ix := range indexesOf(s.active) {
		active[ix] = true
	}
	completions := int(*s.job.Spec.Completions)
	out := map[int]*corev1.Pod{}
	for _, p := range s.pods {
		ix := completionIndex(p)
		if !hasTrackingFinalizer(p) || s.expectedRmFinalizers.Has(p.UID) || ix == unknownIndex || ix >= completions || !isPodFailed(p, s.job) {
			continue
		}
		if s.succeededIndexes.Has(ix) || failed.Has(ix) || active[ix] {
			continue
		}
		if last, ok := out[ix]; !ok || (absoluteIndexFailureCount(last) <= absoluteIndexFailureCount(p) && !finishedTime(p).Before(finishedTime(last))) {
			out[ix] = p
		}
	}
	return out
}

// indexBackoffRemaining is how long the index of the replaced pod must wait:
// the global formula applied to the index's own failures.
func indexBackoffRemaining(replaced *corev1.Pod, now time.Time) time.Duration {
	if replaced == nil {
		return 0
	}
	last := finishedTime(replaced)
	return backoffRecord{failuresAfterLastSuccess: absoluteIndexFailureCount(replaced) + 1, lastFailureTime: &last}.remaining(now)
}

// readyIndexes keeps the indexes whose back-off is over; when none is, it
// returns how long until the first one is.
func readyIndexes(indexes []int, delayed map[int]*corev1.Pod, now time.Time) ([]int, time.Duration) {
	var ready []int
	var wait time.Duration
	for _, ix := range indexes {
		r := indexBackoffRemaining(delayed[ix], now)
		if r == 0 {
			ready = append(ready, ix)
		} else if wait == 0 || r < wait {
			wait = r
		}
	}
	if len(ready) > 0 {
		return ready, 0
	}
	return nil, wait
}

// inheritFailureCounts writes the failure counts of the replaced pod, plus
// its own failure, on its replacement.
func inheritFailureCounts(job *batchv1.Job, pod *corev1.Pod, replaced *corev1.Pod) {
	var failures, ignored int32
	if replaced != nil {
		failures = indexFailureCount(replaced)
		ignored = annotationCount(replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
		if matchPodFailurePolicy(job.Spec.PodFailurePolicy, replaced).countFailed {
			failures++
		} else {
			ignored++
		}
	}
	pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
	if ignored > 0 {
		pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
	}
}
