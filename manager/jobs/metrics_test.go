package jobs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

func TestJobsCollectorCountsWaitingJobs(t *testing.T) {
	jobs := []client.Object{
		policytest.Job(func(j *batchv1.Job) {
			j.Name = "waits"
			j.Status, _ = policy.PendingStatus(j.Status, policy.WaitingForWorker(policy.ReasonNoWorkerFits, "%s", dispatch.NoWorkerFits), policytest.Now)
		}),
		policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Name = "lost" }),
		policytest.Job(policytest.Queued, func(j *batchv1.Job) {
			j.Name = "queued"
			j.Status, _ = policy.PendingStatus(j.Status, policy.QueuedWaiting(policytest.WorkloadView(), "waiting for Kueue to reserve quota"), policytest.Now)
		}),
		policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Name = "runs"; j.Annotations[v1alpha1.WorkerAnnotation] = "w2" }),
		policytest.Job(policytest.Placed, policytest.Complete, func(j *batchv1.Job) {
			j.Name = "elsewhere"
			j.Annotations[v1alpha1.WorkerAnnotation] = "no-such-worker"
		}),
	}
	c := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).
		WithObjects(&v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w2"}}).Build()
	// The cache's events: each Job added, one of them first as it was
	// before it ran, and a Job deleted.
	tally := newJobsTally()
	events := tally.Handler()
	for _, j := range jobs {
		events.OnAdd(j, true)
	}
	gone := policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Name = "gone" })
	events.OnAdd(gone, false)
	events.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "default/gone", Obj: gone})
	before := policytest.Job(policytest.Placed, func(j *batchv1.Job) { j.Name = "later" })
	events.OnAdd(before, false)
	events.OnUpdate(before, policytest.Job(policytest.Placed, policytest.Running, func(j *batchv1.Job) { j.Name = "later"; j.Annotations[v1alpha1.WorkerAnnotation] = "w2" }))
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
