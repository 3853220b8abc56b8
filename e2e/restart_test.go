//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// During a 200-Job run the manager is SIGKILLed five times at random moments
// and restarted: every Job ends Complete exactly once, each had exactly one
// mirror, and no mirror is left once they are done.
func TestManagerKilledRepeatedlyLosesNothing(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	rec := recordWorkers(ctx, t, d, ns)
	counters := watchCounters(ctx, t, d, ns)

	const total = 200
	for i := range total {
		job := sleepJob(ns, fmt.Sprintf("crash-%03d", i), 6*time.Second)
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for kill := range 5 {
		time.Sleep(time.Duration(200+rand.IntN(1800)) * time.Millisecond) // a random moment of the run, on purpose
		if err := d.KillManager(ctx); err != nil {
			t.Fatalf("kill %d: %v", kill+1, err)
		}
	}
	t.Logf("5 kills and restarts done %s after the Jobs were created", time.Since(start).Round(100*time.Millisecond))

	jobs := waitAllComplete(ctx, t, d, ns, total, 5*time.Minute)
	deleteJobsWaitNoMirrors(ctx, t, d, ns)
	rec.close()

	redispatched, duplicated := 0, 0
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		if attempt, _ := strconv.Atoi(j.Annotations[v1alpha1.DispatchAttemptAnnotation]); attempt > 1 {
			redispatched++
		}
		if n := len(rec.mirrors[j.UID]); n != 1 {
			duplicated++
			t.Errorf("%s had %d mirrors, want exactly 1", j.Name, n)
		}
		if j.Status.Succeeded != 1 {
			t.Errorf("%s: succeeded=%d, want 1", j.Name, j.Status.Succeeded)
		}
	}
	counters.mu.Lock()
	for _, dec := range counters.decreases {
		t.Errorf("counter went down: %s", dec)
	}
	counters.mu.Unlock()
	t.Logf("submitted %d, completed %d, re-dispatched %d, duplicated %d, lost 0, orphan mirrors left 0; all done %s after the Jobs were created",
		total, len(jobs), redispatched, duplicated, time.Since(start).Round(100*time.Millisecond))
	d.assertNoRejectedStatusWrites(t)
}
