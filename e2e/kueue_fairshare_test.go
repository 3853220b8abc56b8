//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// kueuePriorityLabel names a Job's WorkloadPriorityClass (Kueue's label).
const kueuePriorityLabel = "kueue.x-k8s.io/priority-class"

// One global queue over two workers: Kueue's fair sharing between two
// tenants of one cohort, and its preemption by priority, carried out by
// jobferry on the workers. Sampled on the workers, what runs never exceeds
// the quota, and nothing runs twice.
func TestKueueFairSharingAndPreemption(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	k := startKueueEnv(ctx, t, localcluster.KueueOptions{FairSharing: true})

	t.Run("a high-priority Job preempts a low-priority one", func(t *testing.T) { preemption(ctx, t, k) })
	// Last: A's backlog is left to the environment's end.
	t.Run("fair share between two tenants", func(t *testing.T) { fairShare(ctx, t, k) })
	k.assertNoRejectedStatusWrites(t)
}

// fairShare: tenants A and B have 4 CPUs each in one cohort, each
// reclaiming its own quota from the other's borrowing; A submits 300
// one-CPU Jobs of 10 s and, borrowing B's idle quota, runs 8 at once; then
// B submits 30. Kueue preempts A's borrowing Jobs for B's at once (their
// mirrors drain, they requeue behind A's backlog), B reaches its share
// ahead of A's backlog, and no more than the cohort's 8 CPUs of pods ever
// run on the workers. B is submitted once Kueue has made the Workloads of
// all A's Jobs, so B's wait is Kueue's decision, not its backlog of
// Workloads to create. A Job of B that borrowed A's idle quota may be
// preempted in turn when A reclaims it: it then runs again, once. The test
// ends when B's Jobs are done; A's backlog ends with the environment.
func fairShare(ctx context.Context, t *testing.T, k *kueueEnv) {
	const quota, nA, nB = 4, 300, 30
	cohort := func(spec *kueue.ClusterQueueSpec) {
		spec.CohortName = "tenants"
		spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny}
	}
	k.clusterQueue(ctx, t, "tenant-a", fmt.Sprint(quota), cohort)
	k.clusterQueue(ctx, t, "tenant-b", fmt.Sprint(quota), cohort)
	nsA, nsB := k.optedInNamespace(ctx, t), k.optedInNamespace(ctx, t)
	k.localQueue(ctx, t, nsA, "team", "tenant-a")
	k.localQueue(ctx, t, nsB, "team", "tenant-b")

	sampler := newTenantSampler(k, map[string]string{"A": nsA, "B": nsB})
	samplingCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sampler.run(samplingCtx, time.Second) })
	defer func() { stop(); wg.Wait() }()

	for i := range nA {
		if _, err := k.manager.BatchV1().Jobs(nsA).Create(ctx, queuedJob(nsA, "team", fmt.Sprintf("a-%03d", i), 10*time.Second, "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sampler.waitFor(ctx, t, "A running 8 at once, borrowing B's idle quota, and the Workloads of all its Jobs made", func(s tenantSample) bool {
		return s.running["A"] == 2*quota && s.workloads["A"] == nA
	})
	for i := range nB {
		if _, err := k.manager.BatchV1().Jobs(nsB).Create(ctx, queuedJob(nsB, "team", fmt.Sprintf("b-%03d", i), 10*time.Second, "1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bSubmitted := len(sampler.all())
	defer func() {
		if t.Failed() {
			k.explainUnfinished(context.WithoutCancel(ctx), t, nsB)
		}
	}()
	waitAllComplete(ctx, t, k.dispatchEnv, nsB, nB, 5*time.Minute)
	stop()
	wg.Wait()

	samples := sampler.all()
	for _, err := range sampler.failures() {
		// A sample that failed is missing from the timeline, not guessed.
		t.Logf("a sample failed: %v", err)
	}
	var timeline strings.Builder
	maxRunning, bFirst, bShare := 0, -1, -1
	for i, s := range samples {
		fmt.Fprintf(&timeline, "\n  t=%3ds  A running %d (reserved %d, admitted %d, starting %d, done %3d, waiting %3d)  B running %d (reserved %d, admitted %d, starting %d, done %2d, waiting %2d)  pods running on the workers %d",
			i, s.running["A"], s.reserved["A"], s.admitted["A"], s.starting["A"], s.done["A"], s.waiting["A"],
			s.running["B"], s.reserved["B"], s.admitted["B"], s.starting["B"], s.done["B"], s.waiting["B"], s.pods)
		maxRunning = max(maxRunning, s.pods)
		if bFirst < 0 && s.running["B"]+s.done["B"] > 0 {
			bFirst = i
		}
		if bShare < 0 && s.running["B"] >= quota && s.waiting["A"] > 0 {
			bShare = i
		}
	}
	t.Logf("fair-share timeline (per second; B submitted at t=%ds):%s", bSubmitted, timeline.String())
	if maxRunning > 2*quota {
		t.Errorf("%d pods ran on the workers at once, more than the cohort's quota of %d CPUs", maxRunning, 2*quota)
	}
	switch {
	case bFirst < 0:
		t.Error("no sample saw a Job of B start")
	case samples[bFirst].waiting["A"] == 0:
		t.Errorf("B's first Job started at t=%ds only once A's backlog was gone", bFirst)
	default:
		t.Logf("B's first Job started at t=%ds, %ds after B submitted, ahead of %d waiting Jobs of A", bFirst, bFirst-bSubmitted, samples[bFirst].waiting["A"])
	}
	if bShare < 0 {
		t.Errorf("B never ran its share of %d Jobs at once while A's backlog waited", quota)
	}
	checkSucceededOnceOnWorkers(ctx, t, k.dispatchEnv, nsB)
}

// preemption: in a ClusterQueue of one CPU that preempts lower priorities,
// a high-priority Job arriving while a low-priority one runs evicts it:
// the low one's mirror is suspended and its pod goes before the high one's
// pod runs, the low one is requeued and completes as a second attempt.
func preemption(ctx context.Context, t *testing.T, k *kueueEnv) {
	k.create(ctx, t, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10})
	k.create(ctx, t, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})
	k.clusterQueue(ctx, t, "urgent", "1", func(spec *kueue.ClusterQueueSpec) {
		spec.Preemption = &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	})
	ns := k.optedInNamespace(ctx, t)
	k.localQueue(ctx, t, ns, "urgent", "urgent")
	job := func(name, priority string, runFor time.Duration) *batchv1.Job {
		j := queuedJob(ns, "urgent", name, runFor, "1")
		j.Labels[kueuePriorityLabel] = priority
		return j
	}

	watch := newPreemptionWatch(k, ns)
	samplingCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { watch.run(samplingCtx) })
	defer func() { stop(); wg.Wait() }()

	if _, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job("low", "low", 20*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watch, not the manager Job's status, says the low one runs: it
	// must see the pod run, then stop and run again.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return watch.lowRuns() >= 1, nil
	}); err != nil {
		t.Fatalf("the low-priority Job's pod never ran on the workers: %v; sequence:%s", err, watch.sequence())
	}
	watch.note("high submitted")
	if _, err := k.manager.BatchV1().Jobs(ns).Create(ctx, job("high", "high", 3*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, k.manager, ns, "high", 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	low := pollJob(ctx, t, k.manager, ns, "low", 2*time.Minute, "Complete after requeueing", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	stop()
	wg.Wait()

	t.Logf("preemption sequence:%s", watch.sequence())
	if watch.overlaps > 0 {
		t.Errorf("in %d samples a pod of the low and of the high Job ran at once on the workers", watch.overlaps)
	}
	if !watch.lowRanTwice() {
		t.Error("the low-priority Job's pod did not stop and run again: it was not preempted")
	}
	if got := low.Annotations[v1alpha1.DispatchAttemptAnnotation]; got != "2" || low.Status.Succeeded != 1 {
		t.Errorf("the preempted Job completed as attempt %q with succeeded=%d, want attempt 2, once", got, low.Status.Succeeded)
	}
}

// tenantSample is one second of the fair-share run: per tenant, the
// manager Jobs running (active), done and waiting (neither), and the pods
// running on the workers in the tenants' namespaces.
type tenantSample struct {
	running, done, waiting map[string]int
	// starting counts the waiting Jobs Kueue unsuspended.
	starting map[string]int
	// reserved and admitted count the tenant's unfinished Workloads with
	// quota reserved, and admitted; workloads counts all of them.
	reserved, admitted, workloads map[string]int
	pods                          int
}

// tenantSampler samples the tenants' namespaces (by tenant) on the
// manager and the workers.
type tenantSampler struct {
	k       *kueueEnv
	tenants map[string]string

	mu      sync.Mutex
	samples []tenantSample
	errs    []error
}

func newTenantSampler(k *kueueEnv, tenants map[string]string) *tenantSampler {
	return &tenantSampler{k: k, tenants: tenants}
}

func (s *tenantSampler) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		sample, err := s.sample(ctx)
		s.mu.Lock()
		if err != nil && ctx.Err() == nil {
			s.errs = append(s.errs, err)
		} else if err == nil {
			s.samples = append(s.samples, sample)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *tenantSampler) sample(ctx context.Context) (tenantSample, error) {
	out := tenantSample{running: map[string]int{}, done: map[string]int{}, waiting: map[string]int{}, reserved: map[string]int{}, admitted: map[string]int{}, workloads: map[string]int{}, starting: map[string]int{}}
	for tenant, ns := range s.tenants {
		var workloads kueue.WorkloadList
		if err := s.k.c.List(ctx, &workloads, client.InNamespace(ns)); err != nil {
			return out, err
		}
		out.workloads[tenant] = len(workloads.Items)
		for _, wl := range workloads.Items {
			if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
				continue
			}
			if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
				out.reserved[tenant]++
			}
			if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
				out.admitted[tenant]++
			}
		}
		list, err := s.k.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return out, err
		}
		for _, j := range list.Items {
			switch {
			case hasCondition(&j, batchv1.JobComplete) != nil:
				out.done[tenant]++
			case j.Status.Active > 0:
				out.running[tenant]++
			default:
				out.waiting[tenant]++
				if !ptr.Deref(j.Spec.Suspend, false) {
					out.starting[tenant]++
				}
			}
		}
		for _, w := range s.k.workers {
			pods, err := w.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
			if err != nil {
				return out, err
			}
			out.pods += len(pods.Items)
		}
	}
	return out, nil
}

// failures are the samples' errors (each one a second missing from the
// timeline).
func (s *tenantSampler) failures() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *tenantSampler) all() []tenantSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tenantSample(nil), s.samples...)
}

// waitFor polls the samples until one satisfies cond.
func (s *tenantSampler) waitFor(ctx context.Context, t *testing.T, what string, cond func(tenantSample) bool) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		samples := s.all()
		if len(samples) > 0 && cond(samples[len(samples)-1]) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-deadline:
			t.Fatalf("waiting for %s: not seen in 2m (last sample %+v)", what, samples[len(samples)-1])
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkSucceededOnceOnWorkers: every Job of ns succeeded once, with
// exactly one pod left on the workers: an attempt Kueue preempted left
// nothing behind (its mirror and pods are gone). It logs how many Jobs were
// preempted and ran again.
func checkSucceededOnceOnWorkers(ctx context.Context, t *testing.T, d *dispatchEnv, ns string) {
	t.Helper()
	jobs, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]int{}
	for _, w := range d.workers {
		list, err := w.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			pods[p.Labels[batchv1.JobNameLabel]]++
		}
	}
	again := 0
	for _, j := range jobs.Items {
		attempt := j.Annotations[v1alpha1.DispatchAttemptAnnotation]
		if attempt != "1" {
			again++
		}
		if j.Status.Succeeded != 1 || pods[j.Name] != 1 {
			t.Errorf("%s/%s: succeeded %d, %d pods on the workers (attempt %q); want once", ns, j.Name, j.Status.Succeeded, pods[j.Name], attempt)
		}
	}
	t.Logf("%d of %d Jobs of %s were preempted (A reclaiming the quota they borrowed) and ran again", again, len(jobs.Items), ns)
}

// preemptionWatch samples the preemption test's namespace every 100 ms,
// recording each change of the Jobs' state on the manager and of their
// pods on the workers, and counting samples where both Jobs' pods run.
type preemptionWatch struct {
	k     *kueueEnv
	ns    string
	start time.Time

	mu        sync.Mutex
	events    []string
	last      map[string]string
	overlaps  int
	lowStarts int
}

func newPreemptionWatch(k *kueueEnv, ns string) *preemptionWatch {
	return &preemptionWatch{k: k, ns: ns, start: time.Now(), last: map[string]string{}}
}

func (w *preemptionWatch) note(event string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, fmt.Sprintf("%6.1fs  %s", time.Since(w.start).Seconds(), event))
}

func (w *preemptionWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.sample(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *preemptionWatch) sample(ctx context.Context) {
	jobs, err := w.k.manager.BatchV1().Jobs(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	running := map[string]bool{}
	for _, c := range w.k.workers {
		pods, err := c.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			running[p.Labels[batchv1.JobNameLabel]] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if running["low"] && running["high"] {
		w.overlaps++
	}
	for _, j := range jobs.Items {
		state := fmt.Sprintf("suspend=%v active=%d placed on %q attempt %s", ptr.Deref(j.Spec.Suspend, false), j.Status.Active,
			j.Annotations[v1alpha1.WorkerAnnotation], j.Annotations[v1alpha1.DispatchAttemptAnnotation])
		if c := hasCondition(&j, batchv1.JobSuspended); c != nil && c.Status == corev1.ConditionTrue {
			state += " (" + c.Reason + ")"
		}
		if hasCondition(&j, batchv1.JobComplete) != nil {
			state = "Complete, attempt " + j.Annotations[v1alpha1.DispatchAttemptAnnotation]
		}
		w.change(j.Name+" on the manager", state)
	}
	for _, name := range []string{"low", "high"} {
		state := "no pod running"
		if running[name] {
			state = "pod running"
		}
		if w.change(name+" on the workers", state) && name == "low" && running[name] {
			w.lowStarts++
		}
	}
}

// change records what's new state of what; true when it changed.
func (w *preemptionWatch) change(what, state string) bool {
	if w.last[what] == state {
		return false
	}
	w.last[what] = state
	w.events = append(w.events, fmt.Sprintf("%6.1fs  %s: %s", time.Since(w.start).Seconds(), what, state))
	return true
}

// lowRanTwice: the low-priority Job's pod started, stopped and started
// again.
func (w *preemptionWatch) lowRanTwice() bool { return w.lowRuns() >= 2 }

// lowRuns is how many times the watch saw the low-priority Job's pod start.
func (w *preemptionWatch) lowRuns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lowStarts
}

func (w *preemptionWatch) sequence() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return "\n  " + strings.Join(w.events, "\n  ")
}
