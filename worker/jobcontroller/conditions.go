package jobcontroller

import (
	"slices"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newCondition(t batchv1.JobConditionType, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
}

func findCondition(conditions []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// ensureCondition sets a condition's status, reason and message, replacing
// it whole when any differs. A False condition is never added: a Job that was
// never suspended has no Suspended condition.
func ensureCondition(conditions []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(conditions, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return conditions, false
		}
		*c = *newCondition(t, reason, message, now)
		c.Status = status
		return conditions, true
	}
	if status == corev1.ConditionFalse {
		return conditions, false
	}
	c := newCondition(t, reason, message, now)
	c.Status = status
	return append(conditions, *c), true
}

// sortedForTracking orders an Indexed Job's pods by completion index, so the
// 500-UID cap releases low indexes first, as upstream.
func sortedForTracking(pods []*corev1.Pod, indexed bool) []*corev1.Pod {
	if !indexed {
		return pods
	}
	out := slices.Clone(pods)
	sort.SliceStable(out, func(i, j int) bool { return completionIndex(out[i]) < completionIndex(out[j]) })
	return out
}

func sortedInts(in []int) []int {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
