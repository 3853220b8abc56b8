package jobcontroller

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/jobferry/jobferry/internal/jobindex"

	"github.com/jobferry/jobferry/internal/jobpods"
)

// unknownIndex is the completion index of a pod without a valid annotation.
const unknownIndex = jobpods.NoIndex

// completionIndex reads the completion index annotation of a pod.
func completionIndex(pod *corev1.Pod) int {
	v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return unknownIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return unknownIndex
	}
	return i
}

func indexesOf(pods []*corev1.Pod) []int {
	set := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); ix != unknownIndex {
			set.Insert(ix)
		}
	}
	return sets.List(set)
}

// firstPendingIndexes returns up to count indexes below completions that are
// neither succeeded nor held by a pod that still counts (active pods, and
// terminating ones when only failed pods may be replaced).
func firstPendingIndexes(count, completions int, succeeded jobindex.Intervals, holding []*corev1.Pod) []int {
	if count == 0 {
		return nil
	}
	taken := succeeded.WithIndexes(indexesOf(holding))
	out := make([]int, 0, count)
	candidate := 0
	for _, r := range taken {
		for ; candidate < completions && len(out) < count && candidate < r.First; candidate++ {
			out = append(out, candidate)
		}
		candidate = max(candidate, r.Last+1)
	}
	for ; candidate < completions && len(out) < count; candidate++ {
		out = append(out, candidate)
	}
	return out
}
