//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// counterWatch samples the manager's Jobs every 200 ms and reports any
// succeeded or failed counter that went down.
type counterWatch struct {
	mu        sync.Mutex
	last      map[string][2]int32
	decreases []string
	samples   int
}

func watchCounters(ctx context.Context, t *testing.T, d *dispatchEnv, ns string) *counterWatch {
	cw := &counterWatch{last: map[string][2]int32{}}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			cw.mu.Lock()
			cw.samples++
			for _, j := range list.Items {
				now := [2]int32{j.Status.Succeeded, j.Status.Failed}
				if prev, ok := cw.last[j.Name]; ok && (now[0] < prev[0] || now[1] < prev[1]) {
					cw.decreases = append(cw.decreases, fmt.Sprintf("%s: succeeded/failed %v -> %v", j.Name, prev, now))
				}
				cw.last[j.Name] = now
			}
			cw.mu.Unlock()
		}
	}()
	return cw
}

// During a 100-Job run one worker's API server is stopped: after the
// worker-lost timeout its unfinished Jobs complete elsewhere; when it comes
// back the mirrors of the stale attempts are deleted and their late status
// never reaches the manager. Every Job ends Complete once, and no sampled
// counter ever goes down.
func TestWorkerLossRedispatchesAndFences(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	samplingCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	counters := watchCounters(samplingCtx, t, d, ns)

	const total = 100
	for i := range total {
		job := sleepJob(ns, fmt.Sprintf("lossy-%03d", i), 15*time.Second)
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	onWorker2 := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, j := range list.Items {
			if j.Status.Active > 0 {
				running++
			}
			if j.Annotations[v1alpha1.WorkerAnnotation] == "worker-2" {
				onWorker2[j.Name] = true
			}
		}
		return running == total, nil
	})
	if err != nil || len(onWorker2) == 0 {
		t.Fatalf("want all %d Jobs running, some on worker-2 (%d there): %v", total, len(onWorker2), err)
	}

	var worker2 = d.Workers[1]
	if worker2.Name != "worker-2" {
		t.Fatalf("unexpected worker order: %s", worker2.Name)
	}
	restart := stopComponent(t, worker2, "kube-apiserver")
	stopped := time.Now()

	jobs := waitAllComplete(ctx, t, d, ns, total, 3*time.Minute)
	t.Logf("all Jobs complete %s after worker-2's API server stopped", time.Since(stopped).Round(time.Second))

	redispatched, duplicated := 0, 0
	for _, j := range jobs {
		attempt, _ := strconv.Atoi(j.Annotations[v1alpha1.DispatchAttemptAnnotation])
		if attempt > 1 {
			redispatched++
			if j.Annotations[v1alpha1.WorkerAnnotation] == "worker-2" {
				t.Errorf("%s was re-dispatched onto the lost worker", j.Name)
			}
		} else if onWorker2[j.Name] {
			t.Errorf("%s was on worker-2 and completed without a re-dispatch", j.Name)
		}
		if j.Status.Succeeded != 1 {
			duplicated++
			t.Errorf("%s: succeeded=%d, want exactly 1", j.Name, j.Status.Succeeded)
		}
	}
	if redispatched != len(onWorker2) {
		t.Errorf("%d Jobs re-dispatched, want the %d that were on worker-2", redispatched, len(onWorker2))
	}

	restart()
	waitConnected(ctx, t, d, "worker-2", metav1.ConditionTrue)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := d.workers["worker-2"].BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("stale mirrors left on worker-2 after it came back: %v", err)
	}
	// The stale mirrors may have run on after the restart; none of that may
	// reach the manager.
	for _, j := range jobs {
		now, err := d.manager.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.Status.Succeeded != j.Status.Succeeded || now.Status.Failed != j.Status.Failed {
			t.Errorf("%s changed after finishing: %s", j.Name, describeStatus(now))
		}
	}
	stopSampling()
	counters.mu.Lock()
	defer counters.mu.Unlock()
	for _, dec := range counters.decreases {
		t.Errorf("counter went down: %s", dec)
	}
	t.Logf("submitted %d, completed %d, re-dispatched %d, duplicated %d, lost 0; %d status samples, %d decreases",
		total, len(jobs), redispatched, duplicated, counters.samples, len(counters.decreases))
	d.assertNoRejectedStatusWrites(t)
}

// A Job annotated jobferry.dev/on-worker-lost: Wait is never run elsewhere:
// past the worker-lost timeout it waits, with an Event saying why, and
// completes on its worker once that is back.
func TestOnWorkerLostWaitIsNeverRedispatched(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "run-once", 10*time.Second)
	job.Annotations = map[string]string{v1alpha1.OnWorkerLostAnnotation: v1alpha1.OnWorkerLostWait}
	workerName, _ := dispatchOne(ctx, t, d, job)
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	var cluster = d.Workers[0]
	if cluster.Name != workerName {
		cluster = d.Workers[1]
	}
	restart := stopComponent(t, cluster, "kube-apiserver")
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := d.manager.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "WorkerLost" && strings.Contains(e.Message, "is not run elsewhere") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no WorkerLost Event explaining the wait: %v", err)
	}
	held := pollJob(ctx, t, d.manager, ns, job.Name, time.Second, "read", func(*batchv1.Job) bool { return true })
	if w, a := held.Annotations[v1alpha1.WorkerAnnotation], held.Annotations[v1alpha1.DispatchAttemptAnnotation]; w != workerName || a != "1" {
		t.Fatalf("the Job moved: worker %q attempt %q, want %s attempt 1", w, a, workerName)
	}
	restart()
	done := pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "Complete on its own worker", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	if w := done.Annotations[v1alpha1.WorkerAnnotation]; w != workerName || done.Status.Succeeded != 1 {
		t.Errorf("finished on %s with %s, want %s and succeeded=1", w, describeStatus(done), workerName)
	}
}
