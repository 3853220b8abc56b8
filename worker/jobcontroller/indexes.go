package jobcontroller

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// unknownIndex is the completion index of a pod without a valid annotation.
const unknownIndex = -1

type interval struct{ first, last int }

// intervals is a sorted list of disjoint, non-adjacent index ranges: the
// in-memory form of status.completedIndexes and status.failedIndexes.
type intervals []interval

// parseIntervals reads the status form ("1,3-5,7"), dropping indexes at or
// beyond completions and malformed entries, like the upstream controller.
func parseIntervals(s string, completions int) intervals {
	if s == "" {
		return nil
	}
	var out intervals
	for _, part := range strings.Split(s, ",") {
		limits := strings.Split(part, "-")
		first, err := strconv.Atoi(limits[0])
		if err != nil {
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if len(limits) > 1 {
			if last, err = strconv.Atoi(limits[1]); err != nil {
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
		} else {
			out = append(out, interval{first, last})
		}
	}
	return out
}

// withIndexes returns the union with sorted single indexes.
func (iv intervals) withIndexes(sorted []int) intervals {
	add := make(intervals, len(sorted))
	for i, ix := range sorted {
		add[i] = interval{ix, ix}
	}
	return iv.merge(add)
}

func (iv intervals) merge(other intervals) intervals {
	var out intervals
	push := func(next interval) {
		if n := len(out); n == 0 || next.first > out[n-1].last+1 {
			out = append(out, next)
		} else if out[n-1].last < next.last {
			out[n-1].last = next.last
		}
	}
	i, j := 0, 0
	for i < len(iv) && j < len(other) {
		if iv[i].first < other[j].first {
			push(iv[i])
			i++
		} else {
			push(other[j])
			j++
		}
	}
	for ; i < len(iv); i++ {
		push(iv[i])
	}
	for ; j < len(other); j++ {
		push(other[j])
	}
	return out
}

func (iv intervals) total() int {
	n := 0
	for _, r := range iv {
		n += r.last - r.first + 1
	}
	return n
}

func (iv intervals) has(ix int) bool {
	for _, r := range iv {
		if ix < r.first {
			return false
		}
		if ix <= r.last {
			return true
		}
	}
	return false
}

// String writes two consecutive indexes as "a,b" and longer runs as "a-c",
// the upstream format the API server validates.
func (iv intervals) String() string {
	var b strings.Builder
	for _, r := range iv {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.first))
		switch {
		case r.last == r.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(r.last))
		case r.last > r.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.last))
		}
	}
	return b.String()
}

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
func firstPendingIndexes(count, completions int, succeeded intervals, holding []*corev1.Pod) []int {
	if count == 0 {
		return nil
	}
	taken := succeeded.withIndexes(indexesOf(holding))
	out := make([]int, 0, count)
	candidate := 0
	for _, r := range taken {
		for ; candidate < completions && len(out) < count && candidate < r.first; candidate++ {
			out = append(out, candidate)
		}
		candidate = max(candidate, r.last+1)
	}
	for ; candidate < completions && len(out) < count; candidate++ {
		out = append(out, candidate)
	}
	return out
}

// generateNameWithIndex is the pod name prefix of an Indexed Job's pod,
// "<job>-<index>-", shortened to leave room for the random suffix.
func generateNameWithIndex(jobName string, index int) string {
	const maxGeneratedNameLength = 63 - 5
	suffix := "-" + strconv.Itoa(index) + "-"
	prefix := jobName + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}
