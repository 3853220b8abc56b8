package jobs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPendingStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	suspended := func(status corev1.ConditionStatus, reason, message string, transition, probe time.Duration) batchv1.JobCondition {
		return batchv1.JobCondition{Type: batchv1.JobSuspended, Status: status, Reason: reason, Message: message, LastTransitionTime: at(transition), LastProbeTime: at(probe)}
	}
	noFit := Waiting{ReasonNoWorkerFits, "no worker fits"}
	cases := map[string]struct {
		status      batchv1.JobStatus
		w           Waiting
		now         time.Duration
		want        []batchv1.JobCondition
		wantChanged bool
	}{
		"a Job without conditions gets Suspended=True with the reason": {
			w: noFit, now: 0, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", 0, 0)},
		},
		"the same reason and message: nothing to write": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", 0, 0)}},
			w:      noFit, now: time.Hour,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", 0, 0)},
		},
		"a new message of the same reason is written, the transition kept": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "w: cordoned", 0, 0)}},
			w:      noFit, now: time.Second, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", 0, time.Second)},
		},
		"a new reason is written at once": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, reasonJobSuspended, "Job suspended", 0, 0)}},
			w:      noFit, now: time.Second, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", 0, time.Second)},
		},
		"a resumed Job waiting again turns True with a new transition time": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionFalse, "JobResumed", "Job resumed", 0, 0)}},
			w:      noFit, now: time.Minute, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, ReasonNoWorkerFits, "no worker fits", time.Minute, time.Minute)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.status.DeepCopy()
			got, changed := PendingStatus(tc.status, tc.w, t0.Add(tc.now))
			if changed != tc.wantChanged {
				t.Errorf("changed = %t, want %t", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want, got.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &tc.status); diff != "" {
				t.Errorf("the input status was modified:\n%s", diff)
			}
		})
	}
}
