package jobcontroller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// finishedAt is a pod whose only container terminated at t0+offset.
func finishedAt(offset time.Duration, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0.Add(offset))}},
	}}}}
}

func TestNextBackoffRecordAndRemaining(t *testing.T) {
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	cases := map[string]struct {
		prev              backoffRecord
		succeeded, failed []*corev1.Pod
		want              backoffRecord
		now               time.Duration
		remaining         time.Duration
	}{
		"nothing new keeps the streak": {
			prev: backoffRecord{2, at(0)}, want: backoffRecord{2, at(0)}, now: 5 * time.Second, remaining: 15 * time.Second,
		},
		"first failure waits 10s": {
			failed: []*corev1.Pod{finishedAt(0, corev1.PodFailed)},
			want:   backoffRecord{1, at(0)}, now: 4 * time.Second, remaining: 6 * time.Second,
		},
		"third failure in a row waits 40s from the last": {
			prev:   backoffRecord{1, at(0)},
			failed: []*corev1.Pod{finishedAt(3*time.Second, corev1.PodFailed), finishedAt(time.Second, corev1.PodFailed)},
			want:   backoffRecord{3, at(3 * time.Second)}, now: 13 * time.Second, remaining: 30 * time.Second,
		},
		"a success resets": {
			prev:      backoffRecord{4, at(0)},
			succeeded: []*corev1.Pod{finishedAt(time.Second, corev1.PodSucceeded)},
			want:      backoffRecord{}, now: time.Second, remaining: 0,
		},
		"only failures after the last success count": {
			succeeded: []*corev1.Pod{finishedAt(5*time.Second, corev1.PodSucceeded)},
			failed:    []*corev1.Pod{finishedAt(time.Second, corev1.PodFailed), finishedAt(7*time.Second, corev1.PodFailed)},
			want:      backoffRecord{1, at(7 * time.Second)}, now: 7 * time.Second, remaining: 10 * time.Second,
		},
		"capped at 10 minutes": {
			prev: backoffRecord{30, at(0)}, want: backoffRecord{30, at(0)}, now: time.Minute, remaining: 9 * time.Minute,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := nextBackoffRecord(tc.prev, tc.succeeded, tc.failed)
			if got.failuresAfterLastSuccess != tc.want.failuresAfterLastSuccess || !equalTimes(got.lastFailureTime, tc.want.lastFailureTime) {
				t.Errorf("record = {%d %v}, want {%d %v}", got.failuresAfterLastSuccess, got.lastFailureTime, tc.want.failuresAfterLastSuccess, tc.want.lastFailureTime)
			}
			if r := got.remaining(t0.Add(tc.now)); r != tc.remaining {
				t.Errorf("remaining = %v, want %v", r, tc.remaining)
			}
		})
	}
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func TestFinishedTime(t *testing.T) {
	deleted := metav1.NewTime(t0.Add(time.Minute))
	grace := int64(30)
	cases := map[string]struct {
		pod  *corev1.Pod
		want time.Time
	}{
		"last container termination": {pod: finishedAt(2*time.Second, corev1.PodFailed), want: t0.Add(2 * time.Second)},
		"ready=false transition when a container still runs": {pod: &corev1.Pod{Status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(3 * time.Second))}},
		}}, want: t0.Add(3 * time.Second)},
		"deletion minus grace period": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: &grace}}, want: t0.Add(30 * time.Second)},
		"else creation":               {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}, want: t0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := finishedTime(tc.pod); !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
