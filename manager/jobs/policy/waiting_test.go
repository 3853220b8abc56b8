package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

func TestPendingStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	suspended := func(status corev1.ConditionStatus, reason, message string, transition, probe time.Duration) batchv1.JobCondition {
		return batchv1.JobCondition{Type: batchv1.JobSuspended, Status: status, Reason: reason, Message: message, LastTransitionTime: at(transition), LastProbeTime: at(probe)}
	}
	noFit := policy.Waiting{policy.ReasonNoWorkerFits, "no worker fits"}
	cases := map[string]struct {
		status      batchv1.JobStatus
		w           policy.Waiting
		now         time.Duration
		want        []batchv1.JobCondition
		wantChanged bool
	}{
		"a Job without conditions gets Suspended=True with the reason": {
			w: noFit, now: 0, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", 0, 0)},
		},
		"the same reason and message: nothing to write": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", 0, 0)}},
			w:      noFit, now: time.Hour,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", 0, 0)},
		},
		"a new message of the same reason is written, the transition kept": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "w: cordoned", 0, 0)}},
			w:      noFit, now: time.Second, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", 0, time.Second)},
		},
		"a new reason is written at once": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonJobSuspended, "Job suspended", 0, 0)}},
			w:      noFit, now: time.Second, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", 0, time.Second)},
		},
		"a resumed Job waiting again turns True with a new transition time": {
			status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{suspended(corev1.ConditionFalse, "JobResumed", "Job resumed", 0, 0)}},
			w:      noFit, now: time.Minute, wantChanged: true,
			want: []batchv1.JobCondition{suspended(corev1.ConditionTrue, policy.ReasonNoWorkerFits, "no worker fits", time.Minute, time.Minute)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.status.DeepCopy()
			got, changed := policy.PendingStatus(tc.status, tc.w, t0.Add(tc.now))
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

// Each waiting message jobferry writes reads back as its reason.
func TestJobWaitingReasons(t *testing.T) {
	withWaiting := func(w policy.Waiting) *batchv1.Job {
		job := policytest.Job()
		job.Status, _ = policy.PendingStatus(job.Status, w, policytest.Now)
		return job
	}
	full := []dispatch.Worker{{Name: "w1", Connected: true, Pools: []v1alpha1.NodePool{{Name: "general",
		Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}, Free: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}}}
	noFit, err := dispatch.Place(policytest.Job(), full)
	if err != nil || noFit.Placed() {
		t.Fatalf("placed %v, %v on a full worker", noFit, err)
	}
	_, invalid := dispatch.Place(policytest.Job(func(j *batchv1.Job) { j.Annotations[v1alpha1.ClusterSelectorAnnotation] = "region in (eu" }), full)
	if invalid == nil {
		t.Fatal("a malformed cluster selector was accepted")
	}
	down := policy.Next(policy.State{Job: policytest.Job(policytest.Placed), Now: policytest.Now, Worker: "w1", WorkerCluster: &v1alpha1.WorkerCluster{Status: v1alpha1.WorkerClusterStatus{
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(policytest.Now.Add(-time.Minute))}}}}}, policytest.Config)
	if down.Kind != policy.StepShowWaiting {
		t.Fatalf("a Job on a disconnected worker: step %s, want ShowWaiting", down.Kind)
	}
	deleted := policy.Next(policy.State{Job: policytest.Job(policytest.Placed), Now: policytest.Now, Worker: "w1", WorkerGoneSince: policytest.Now.Add(-time.Minute)}, policytest.Config)
	if deleted.Kind != policy.StepShowWaiting {
		t.Fatalf("a Job on a deleted worker: step %s, want ShowWaiting", deleted.Kind)
	}
	cases := []struct {
		name       string
		job        *batchv1.Job
		workerDown bool
		want       string
	}{
		{"placed on a worker whose WorkerCluster was deleted, nothing ran", withWaiting(deleted.Waiting), false, policy.WaitingWorkerLost},
		{"suspended by its user", withWaiting(policy.UserSuspendedWaiting()), false, policy.WaitingUserSuspended},
		{"refused by the dispatch policy", withWaiting(policy.Waiting{policy.ReasonNotAllowed, "jobferry does not dispatch this Job (rule: namespace opt-in): ..."}), false, policy.WaitingNotAllowed},
		{"no worker has room", withWaiting(policy.WaitingForWorker(policy.ReasonNoWorkerFits, "%s", noFit.Gist())), false, policy.WaitingNoWorkerFits},
		{"malformed cluster selector", withWaiting(policy.WaitingForWorker(policy.ReasonInvalidClusterSelector, "%v", invalid)), false, policy.WaitingInvalidSelector},
		{"placement write refused", withWaiting(policy.WaitingForWorker(policy.ReasonWaitingForWorker, "recording the placement on %s was refused: %s", "w1", "Too long")), false, policy.WaitingPlacementRefused},
		{"placed on a disconnected worker, nothing ran", withWaiting(down.Waiting), false, policy.WaitingWorkerLost},
		{"running on a disconnected worker", policytest.Job(policytest.Placed, policytest.Running), true, policy.WaitingWorkerLost},
		{"mirror refused", withWaiting(policy.WaitingForMirror(policy.ReasonWaitingForMirror, "w1", "%s was refused: %s", "creating the mirror", "denied")), false, policy.WaitingMirrorRefused},
		{"queued in Kueue", withWaiting(policy.QueuedWaiting(policytest.WorkloadView(), "waiting for Kueue to reserve quota")), false, policy.WaitingQueued},
		{"rejected by jobferry's check", withWaiting(policy.WaitingForWorker(policy.ReasonNoWorkerCanRun, "no worker cluster could ever run this Job")), false, policy.WaitingNoWorkerCanRun},
		{"running", policytest.Job(policytest.Placed, policytest.Running), false, ""},
		{"finished on a disconnected worker", policytest.Job(policytest.Placed, policytest.Complete), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := policy.JobWaiting(tc.job, tc.workerDown); got != tc.want {
				t.Errorf("reason %q, want %q (conditions %+v)", got, tc.want, tc.job.Status.Conditions)
			}
		})
	}
}
