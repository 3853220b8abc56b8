package jobs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
)

// Each waiting message jobferry writes reads back as its reason.
func TestJobWaitingReasons(t *testing.T) {
	withWaiting := func(w Waiting) *batchv1.Job {
		job := stepJob()
		job.Status, _ = PendingStatus(job.Status, w, stepNow)
		return job
	}
	full := []dispatch.Worker{{Name: "w1", Connected: true, Pools: []v1alpha1.NodePool{{Name: "general",
		Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}, Free: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}}}
	noFit, err := dispatch.Place(stepJob(), full)
	if err != nil || noFit.Placed() {
		t.Fatalf("placed %v, %v on a full worker", noFit, err)
	}
	_, invalid := dispatch.Place(stepJob(func(j *batchv1.Job) { j.Annotations[v1alpha1.ClusterSelectorAnnotation] = "region in (eu" }), full)
	if invalid == nil {
		t.Fatal("a malformed cluster selector was accepted")
	}
	down := Next(State{Job: stepJob(placed), Now: stepNow, Worker: "w1", WorkerCluster: &v1alpha1.WorkerCluster{Status: v1alpha1.WorkerClusterStatus{
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(stepNow.Add(-time.Minute))}}}}}, testStepConfig)
	if down.Kind != StepShowWaiting {
		t.Fatalf("a Job on a disconnected worker: step %s, want ShowWaiting", down.Kind)
	}
	deleted := Next(State{Job: stepJob(placed), Now: stepNow, Worker: "w1", WorkerGoneSince: stepNow.Add(-time.Minute)}, testStepConfig)
	if deleted.Kind != StepShowWaiting {
		t.Fatalf("a Job on a deleted worker: step %s, want ShowWaiting", deleted.Kind)
	}
	cases := []struct {
		name       string
		job        *batchv1.Job
		workerDown bool
		want       string
	}{
		{"placed on a worker whose WorkerCluster was deleted, nothing ran", withWaiting(deleted.Waiting), false, waitingWorkerLost},
		{"suspended by its user", withWaiting(UserSuspendedWaiting()), false, waitingUserSuspended},
		{"refused by the dispatch policy", withWaiting(Waiting{ReasonNotAllowed, "jobferry does not dispatch this Job (rule: namespace opt-in): ..."}), false, waitingNotAllowed},
		{"no worker has room", withWaiting(WaitingForWorker(ReasonNoWorkerFits, "%s", noFit.Gist())), false, waitingNoWorkerFits},
		{"malformed cluster selector", withWaiting(WaitingForWorker(ReasonInvalidClusterSelector, "%v", invalid)), false, waitingInvalidSelector},
		{"placement write refused", withWaiting(WaitingForWorker(ReasonWaitingForWorker, "recording the placement on %s was refused: %s", "w1", "Too long")), false, waitingPlacementRefused},
		{"placed on a disconnected worker, nothing ran", withWaiting(down.Waiting), false, waitingWorkerLost},
		{"running on a disconnected worker", stepJob(placed, running), true, waitingWorkerLost},
		{"mirror refused", withWaiting(WaitingForMirror(ReasonWaitingForMirror, "w1", "%s was refused: %s", "creating the mirror", "denied")), false, waitingMirrorRefused},
		{"queued in Kueue", withWaiting(QueuedWaiting(workloadView(), "waiting for Kueue to reserve quota")), false, waitingQueued},
		{"rejected by jobferry's check", withWaiting(WaitingForWorker(ReasonNoWorkerCanRun, "no worker cluster could ever run this Job")), false, waitingNoWorkerCanRun},
		{"running", stepJob(placed, running), false, ""},
		{"finished on a disconnected worker", stepJob(placed, complete), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := JobWaiting(tc.job, tc.workerDown); got != tc.want {
				t.Errorf("reason %q, want %q (conditions %+v)", got, tc.want, tc.job.Status.Conditions)
			}
		})
	}
}

func TestJobsCollectorCountsWaitingJobs(t *testing.T) {
	jobs := []client.Object{
		stepJob(func(j *batchv1.Job) {
			j.Name = "waits"
			j.Status, _ = PendingStatus(j.Status, WaitingForWorker(ReasonNoWorkerFits, "%s", dispatch.NoWorkerFits), stepNow)
		}),
		stepJob(placed, running, func(j *batchv1.Job) { j.Name = "lost" }),
		stepJob(queued, func(j *batchv1.Job) {
			j.Name = "queued"
			j.Status, _ = PendingStatus(j.Status, QueuedWaiting(workloadView(), "waiting for Kueue to reserve quota"), stepNow)
		}),
		stepJob(placed, running, func(j *batchv1.Job) { j.Name = "runs"; j.Annotations[v1alpha1.WorkerAnnotation] = "w2" }),
		stepJob(placed, complete, func(j *batchv1.Job) {
			j.Name = "elsewhere"
			j.Annotations[v1alpha1.WorkerAnnotation] = "no-such-worker"
		}),
	}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithObjects(&v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w2"}}).Build()
	// The cache's events: each Job added, one of them first as it was
	// before it ran, and a Job deleted.
	tally := newJobsTally()
	events := tally.handler()
	for _, j := range jobs {
		events.OnAdd(j, true)
	}
	gone := stepJob(placed, running, func(j *batchv1.Job) { j.Name = "gone" })
	events.OnAdd(gone, false)
	events.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "default/gone", Obj: gone})
	before := stepJob(placed, func(j *batchv1.Job) { j.Name = "later" })
	events.OnAdd(before, false)
	events.OnUpdate(before, stepJob(placed, running, func(j *batchv1.Job) { j.Name = "later"; j.Annotations[v1alpha1.WorkerAnnotation] = "w2" }))
	events.OnAdd(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "not-a-manager-job"}}, false)
	synced := false
	collector := NewJobsCollector(tally, func() bool { return synced }, c, func(worker string) bool { return worker == "w2" })
	if n := testutil.CollectAndCount(collector); n != 0 {
		t.Errorf("%d series served before the cache's Jobs were counted; want none", n)
	}
	synced = true
	want := `
# HELP jobferry_jobs_waiting Unfinished manager Jobs that do not run, by reason: user_suspended, not_allowed, no_worker_fits, invalid_selector, placement_refused, worker_lost, mirror_refused, queued, no_worker_can_run, pods_not_admitted, quota_exceeded.
# TYPE jobferry_jobs_waiting gauge
jobferry_jobs_waiting{reason="invalid_selector"} 0
jobferry_jobs_waiting{reason="mirror_refused"} 0
jobferry_jobs_waiting{reason="no_worker_can_run"} 0
jobferry_jobs_waiting{reason="no_worker_fits"} 1
jobferry_jobs_waiting{reason="not_allowed"} 0
jobferry_jobs_waiting{reason="placement_refused"} 0
jobferry_jobs_waiting{reason="pods_not_admitted"} 0
jobferry_jobs_waiting{reason="queued"} 1
jobferry_jobs_waiting{reason="quota_exceeded"} 0
jobferry_jobs_waiting{reason="user_suspended"} 0
jobferry_jobs_waiting{reason="worker_lost"} 1
`
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want), "jobferry_jobs_waiting"); err != nil {
		t.Error(err)
	}
	// The worker label takes registered workers' names only: a Job's
	// annotation is no bounded set of values.
	wantJobs := `
# HELP jobferry_jobs Manager Jobs by worker (empty while unplaced, (unregistered) for a name no WorkerCluster has) and phase (Pending, Running, Succeeded, Failed).
# TYPE jobferry_jobs gauge
jobferry_jobs{phase="Pending",worker=""} 2
jobferry_jobs{phase="Running",worker="w1"} 1
jobferry_jobs{phase="Running",worker="w2"} 2
jobferry_jobs{phase="Succeeded",worker="(unregistered)"} 1
`
	if err := testutil.CollectAndCompare(collector, strings.NewReader(wantJobs), "jobferry_jobs"); err != nil {
		t.Error(err)
	}
}

// Every reason of the Suspended condition jobferry writes maps to one of
// the metric's, and each of the metric's has one.
func TestWaitingReasonsCoverTheConditions(t *testing.T) {
	seen := map[string]bool{}
	for reason, label := range waitingByReason {
		if !slices.Contains(waitingReasons, label) {
			t.Errorf("condition reason %s maps to %q, not one of the metric's reasons", reason, label)
		}
		seen[label] = true
	}
	for _, label := range waitingReasons {
		if !seen[label] && label != waitingWorkerLost {
			t.Errorf("the metric's reason %q comes from no condition reason", label)
		}
	}
}
