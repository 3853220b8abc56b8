package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

func TestCompletedWithoutPods(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now)
	reached := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached,
			Message: "Reached expected number of succeeded pods", LastProbeTime: at, LastTransitionTime: at}
	}
	upstream := batchv1.JobStatus{
		Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0), UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		Conditions:     []batchv1.JobCondition{reached(batchv1.JobSuccessCriteriaMet), reached(batchv1.JobComplete)},
		CompletionTime: &at,
	}
	withStart := *upstream.DeepCopy()
	withStart.StartTime = &at
	waitingCond := batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: policy.ReasonNoWorkerFits}
	cases := map[string]struct {
		suspend bool
		status  batchv1.JobStatus
		want    batchv1.JobStatus
	}{
		"running: started and complete at once":                         {suspend: false, want: withStart},
		"suspended: complete without a startTime (the API's exemption)": {suspend: true, want: upstream},
		"the Suspended condition jobferry showed while it waited goes": {
			suspend: true, status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{waitingCond}}, want: upstream,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](0), Suspend: ptr.To(tc.suspend)}, Status: tc.status}
			if !policy.NothingToRun(job) {
				t.Fatal("NothingToRun = false for completions 0")
			}
			if diff := cmp.Diff(tc.want, policy.CompletedWithoutPods(job, now)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
	for _, completions := range []*int32{nil, ptr.To[int32](1)} {
		if job := (&batchv1.Job{Spec: batchv1.JobSpec{Completions: completions}}); policy.NothingToRun(job) {
			t.Errorf("NothingToRun = true for completions %v", completions)
		}
	}
}
