//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// stressResult is what one controller did with the stress Job.
type stressResult struct {
	succeeded, failed int32
	deleted           int
	restarts          int
	trackingLeft      int
	elapsed           time.Duration
}

func (r stressResult) podsPerSecond() float64 {
	return float64(r.succeeded+r.failed) / r.elapsed.Seconds()
}

// Stress scenario (issue: worker Job controller): 1000 completions at
// parallelism 50, KWOK starting each pod after 300 ms and completing it 1 s
// later; while it runs, 20 pods are deleted at random and the controller is
// restarted twice. Both controllers must end with succeeded 1000, failed
// equal to the deletions, and no pod holding the tracking finalizer.
//
// The deleted pods are ones still Pending, each delete conditional on the
// resourceVersion read: KWOK queues a running pod's completion when it starts
// and may still apply it after the deletion (its stage queue cancels the job
// only once it has seen the deletion), so a deleted running pod can end
// Succeeded, and whether a controller then counts it failed depends on when
// it looked. A pod deleted while Pending can only end Failed.
const (
	stressCompletions = 1000
	stressParallelism = 50
	stressDeletions   = 20
)

func runStress(ctx context.Context, t *testing.T, side *conformanceSide, seed uint64) stressResult {
	t.Helper()
	ns, err := side.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stress-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := sleepJob(ns.Name, "stress", time.Second)
	job.Spec.Template.Annotations[readyDelayAnnotation] = "300ms"
	job.Spec.Completions, job.Spec.Parallelism = ptr.To[int32](stressCompletions), ptr.To[int32](stressParallelism)
	job.Spec.BackoffLimit = ptr.To[int32](stressDeletions * 5)
	job.Spec.ManagedBy = side.managedBy
	job.Spec.Template.Spec.NodeSelector = map[string]string{"jobferry.dev/pool": "general"}
	rng := rand.New(rand.NewPCG(seed, seed))
	// Deletions and restarts are spread over the run by progress, not time;
	// the last deletion comes with 300 completions to go, so pending pods
	// remain to delete even when a controller races through the end (with
	// 150 to go, a fast run once finished before the 20th pending pod was
	// caught).
	deleteAt := make([]int32, stressDeletions)
	for i := range deleteAt {
		deleteAt[i] = int32(50 + i*(stressCompletions-300)/stressDeletions)
	}
	restartAt := []int32{stressCompletions * 3 / 10, stressCompletions * 65 / 100}

	start := time.Now()
	if _, err := side.client.BatchV1().Jobs(ns.Name).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var res stressResult
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := side.client.BatchV1().Jobs(ns.Name).Get(ctx, "stress", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if hasCondition(j, batchv1.JobComplete) != nil || hasCondition(j, batchv1.JobFailed) != nil {
			res.succeeded, res.failed = j.Status.Succeeded, j.Status.Failed
			return true, nil
		}
		if res.deleted < len(deleteAt) && j.Status.Succeeded >= deleteAt[res.deleted] {
			ok, err := deleteRandomPendingPod(ctx, side, ns.Name, rng)
			if err != nil {
				return false, err
			}
			if ok {
				res.deleted++
			}
		}
		if res.restarts < len(restartAt) && j.Status.Succeeded >= restartAt[res.restarts] {
			if err := side.restart(ctx); err != nil {
				return false, err
			}
			res.restarts++
		}
		return false, nil
	})
	res.elapsed = time.Since(start)
	if err != nil {
		t.Fatalf("%s: stress Job: %v (deleted %d, restarts %d)", side.name, err, res.deleted, res.restarts)
	}
	pods, err := side.client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			res.trackingLeft++
		}
	}
	return res
}

// deleteRandomPendingPod deletes one pending pod, on condition that it has
// not changed since it was read; false when there was none to delete.
func deleteRandomPendingPod(ctx context.Context, side *conformanceSide, ns string, rng *rand.Rand) (bool, error) {
	pods, err := side.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	pending := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending
	})
	if len(pending) == 0 {
		return false, nil
	}
	p := pending[rng.IntN(len(pending))]
	err = side.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion},
	})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting pod %s: %w", p.Name, err)
	}
	return true, nil
}

func testStress(t *testing.T, kcm, worker *conformanceSide) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	results := map[string]stressResult{}
	// One after the other, so each controller has the machine to itself.
	for _, side := range []*conformanceSide{kcm, worker} {
		r := runStress(ctx, t, side, seed)
		results[side.name] = r
		t.Logf("stress on %s: succeeded %d, failed %d, pods deleted %d, controller restarts %d, pods left with the tracking finalizer %d, %.1f s, %.1f pods/s",
			side.name, r.succeeded, r.failed, r.deleted, r.restarts, r.trackingLeft, r.elapsed.Seconds(), r.podsPerSecond())
		if r.succeeded != stressCompletions || r.trackingLeft != 0 || r.restarts != 2 || r.deleted != stressDeletions {
			t.Errorf("%s: succeeded %d (want %d), pods with the tracking finalizer %d (want 0), restarts %d (want 2), deleted %d (want %d)",
				side.name, r.succeeded, stressCompletions, r.trackingLeft, r.restarts, r.deleted, stressDeletions)
		}
		if r.failed != int32(r.deleted) {
			t.Errorf("%s: failed %d, want one per deleted pod (%d)", side.name, r.failed, r.deleted)
		}
	}
	if k, w := results[kcm.name].failed, results[worker.name].failed; k != w {
		t.Errorf("failed differs: kube-controller-manager %d, jobferry worker %d", k, w)
	}
	// The worker's metrics count since its last restart, which came before
	// the Job finished.
	families := scrapeMetrics(t, worker.metricsURL)
	for _, name := range []string{"jobferry_worker_job_syncs_total", "jobferry_worker_job_pods_finished_total",
		"jobferry_worker_job_pods_creation_total", "jobferry_worker_terminated_pods_tracking_finalizer_total", "jobferry_worker_jobs_finished_total"} {
		if _, ok := families[name]; !ok {
			t.Errorf("worker metrics lack %s", name)
		}
	}
	// Since the last restart: the Job finished once, deletions after it
	// made replacements, and finished pods were released.
	for _, want := range []struct {
		metric string
		labels map[string]string
		check  func(float64) bool
		what   string
	}{
		{"jobferry_worker_jobs_finished_total", map[string]string{"result": "succeeded", "reason": "CompletionsReached"}, func(v float64) bool { return v == 1 }, "1"},
		{"jobferry_worker_job_pods_creation_total", map[string]string{"reason": "recreate_terminating_or_failed", "status": "succeeded"}, func(v float64) bool { return v > 0 }, "> 0"},
		{"jobferry_worker_terminated_pods_tracking_finalizer_total", map[string]string{"event": "delete"}, func(v float64) bool { return v > 0 }, "> 0"},
		{"jobferry_worker_job_pods_finished_total", map[string]string{"result": "failed"}, func(v float64) bool { return v > 0 }, "> 0"},
	} {
		if got := metricSum(families[want.metric], want.labels); !want.check(got) {
			t.Errorf("%s%v = %v, want %s", want.metric, want.labels, got, want.what)
		}
	}
}

// metricSum adds the counters or gauges of a family whose labels include match.
func metricSum(f *dto.MetricFamily, match map[string]string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && have[k] == v
		}
		if ok {
			// Only one of the two is set.
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
