//go:build integration

package simworker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/e2e/testenv"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// syncLog collects what the simulator reports (refused writes).
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// On a real API server with no controller, the simulator moves Jobs through
// statuses the Job status validation accepts — started, complete; failed;
// suspended before and while running, then resumed — with no write refused,
// and publishes a ClusterCapacity that counts the running Jobs' requests.
func TestIntegrationSimulatedWorker(t *testing.T) {
	opts := Options{Timing: Timing{Start: 100 * time.Millisecond, RunFor: 200 * time.Millisecond}, Publish: 100 * time.Millisecond, Heartbeat: time.Second, Concurrency: 2}
	ctx, s := startSimulated(t, opts)
	c, cfg, log, job, waitFor := s.kube, s.cfg, s.log, s.job, s.waitFor
	is := func(t batchv1.JobConditionType) func(*batchv1.Job) bool {
		return func(j *batchv1.Job) bool { return condition(j.Status, t) }
	}

	job("completes", nil)
	job("fails", func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{FailLabel: "true"} })
	job("suspended", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })
	job("runs-long", func(j *batchv1.Job) { j.Spec.Template.Annotations = map[string]string{RunForAnnotation: "1h"} })

	done1 := waitFor("completes", "Complete", is(batchv1.JobComplete))
	if done1.Status.Succeeded != 1 || done1.Status.CompletionTime == nil || !condition(done1.Status, batchv1.JobSuccessCriteriaMet) {
		t.Errorf("a completed Job's status: %+v", done1.Status)
	}
	if failed := waitFor("fails", "Failed", is(batchv1.JobFailed)); failed.Status.Failed != 1 || !condition(failed.Status, batchv1.JobFailureTarget) {
		t.Errorf("a failed Job's status: %+v", failed.Status)
	}
	waitFor("suspended", "Suspended", is(batchv1.JobSuspended))
	running := waitFor("runs-long", "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 && j.Status.StartTime != nil })

	// The running Job holds its request in the summary.
	cc := &v1alpha1.ClusterCapacity{}
	cl, err := client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Name: v1alpha1.ClusterCapacityName}, cc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if len(cc.Status.Pools) != 1 {
			return false, nil
		}
		requested := cc.Status.Pools[0].Requested[corev1.ResourceCPU]
		return requested.Cmp(resource.MustParse("500m")) == 0 && cc.Status.Pools[0].Nodes == 2, nil
	}); err != nil {
		t.Fatalf("the summary does not count the running Job's 500m: %+v", cc.Status)
	}

	// Suspended while running, it stops; resumed, it starts again; both
	// suspended Jobs then finish.
	running.Spec.Suspend = ptr.To(true)
	if _, err := c.BatchV1().Jobs(metav1.NamespaceDefault).Update(ctx, running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("runs-long", "stopped", func(j *batchv1.Job) bool {
		return j.Status.Active == 0 && j.Status.StartTime == nil && condition(j.Status, batchv1.JobSuspended)
	})
	for _, name := range []string{"runs-long", "suspended"} {
		resume := []byte(`{"spec":{"suspend":false}}`)
		if name == "runs-long" {
			resume = []byte(`{"spec":{"suspend":false,"template":{"metadata":{"annotations":{"` + RunForAnnotation + `":"100ms"}}}}}`)
		}
		if _, err := c.BatchV1().Jobs(metav1.NamespaceDefault).Patch(ctx, name, "application/merge-patch+json", resume, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		resumed := waitFor(name, "Complete after resuming", is(batchv1.JobComplete))
		if c := conditionOf(resumed.Status, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "JobResumed" {
			t.Errorf("%s resumed with Suspended %+v", name, c)
		}
	}
	if out := log.String(); out != "" {
		t.Errorf("the simulator reports:\n%s", out)
	}
}

// Held Jobs run until a release, which completes those there are then at
// ReleaseRate, oldest name first; a Job created after it is held until
// the next one.
func TestIntegrationSimulatedWorkerHoldsUntilReleased(t *testing.T) {
	release := make(chan struct{})
	ctx, s, names := startHeld(t, release, 0)
	s.stillRunning(ctx, "held-0", time.Second)

	release <- struct{}{}
	completed := map[string]time.Time{}
	for _, name := range names {
		s.waitFor(name, "Complete once released", isComplete)
		completed[name] = time.Now()
	}
	// Ten a second, one at a time: the third completes at least 0.2 s after
	// the first is released.
	if gap := completed["held-2"].Sub(completed["held-0"]); gap < 150*time.Millisecond {
		t.Errorf("three Jobs released at 10/s completed within %s", gap)
	}

	s.job("later", nil)
	s.waitFor("later", "running", isRunning)
	s.stillRunning(ctx, "later", time.Second)
	release <- struct{}{}
	s.waitFor("later", "Complete after the second release", isComplete)
	if out := s.log.String(); out != "" {
		t.Errorf("the simulator reports:\n%s", out)
	}
}

// With a sample, the first release completes only that many of the held
// Jobs, oldest name first, and the next the rest.
func TestIntegrationSimulatedWorkerReleasesASampleFirst(t *testing.T) {
	release := make(chan struct{})
	ctx, s, _ := startHeld(t, release, 2)

	release <- struct{}{}
	s.waitFor("held-0", "Complete in the sample", isComplete)
	s.waitFor("held-1", "Complete in the sample", isComplete)
	s.stillRunning(ctx, "held-2", time.Second)
	release <- struct{}{}
	s.waitFor("held-2", "Complete after the second release", isComplete)
	if out := s.log.String(); out != "" {
		t.Errorf("the simulator reports:\n%s", out)
	}
}

// isRunning and isComplete are what a held Job's status shows.
func isRunning(j *batchv1.Job) bool  { return j.Status.Active == 1 && j.Status.StartTime != nil }
func isComplete(j *batchv1.Job) bool { return condition(j.Status, batchv1.JobComplete) }

// startHeld starts the simulator holding Jobs, released 10 a second on
// release (the first sample of them, when sample > 0), and three Jobs,
// held-0 to held-2, once they run.
func startHeld(t *testing.T, release chan struct{}, sample int) (context.Context, *simEnv, []string) {
	t.Helper()
	opts := Options{Timing: Timing{Start: 50 * time.Millisecond, RunFor: 50 * time.Millisecond, Hold: true}, Publish: 100 * time.Millisecond, Heartbeat: time.Second,
		Concurrency: 2, Release: release, ReleaseRate: 10, ReleaseSample: sample}
	ctx, s := startSimulated(t, opts)
	names := []string{"held-0", "held-1", "held-2"}
	for _, name := range names {
		s.job(name, nil)
	}
	for _, name := range names {
		s.waitFor(name, "running", isRunning)
	}
	return ctx, s, names
}

// simEnv is an envtest API server with the simulator running on it.
type simEnv struct {
	t    *testing.T
	ctx  context.Context
	kube kubernetes.Interface
	cfg  *rest.Config
	log  *syncLog
}

// startSimulated starts an API server and the simulator on it with opts,
// both stopped when the test ends.
func startSimulated(t *testing.T, opts Options) (context.Context, *simEnv) {
	t.Helper()
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../../api/v1alpha1/crds"}}
	cfg := testenv.Start(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// The tests poll every 20-50 ms: above client-go's default 5 a second.
	cfg.QPS, cfg.Burst = 100, 100
	s := &simEnv{t: t, ctx: ctx, kube: kubernetes.NewForConfigOrDie(cfg), cfg: cfg, log: &syncLog{}}
	opts.Log = s.log
	pool := localcluster.Pool{Name: "general", Nodes: 2, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}}
	simCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(simCtx, []Target{{Name: "sim", Config: cfg, Pools: []localcluster.Pool{pool}}}, opts)
	}()
	// Registered after the API server's: runs before it stops.
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ctx, s
}

// job creates a Job of one 500m pod in the default namespace, changed by
// mutate.
func (s *simEnv) job(name string, mutate func(*batchv1.Job)) {
	s.t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "registry.example/sim:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		}}}},
	}}
	if mutate != nil {
		mutate(j)
	}
	if _, err := s.kube.BatchV1().Jobs(j.Namespace).Create(s.ctx, j, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// waitFor polls the Job until cond holds.
func (s *simEnv) waitFor(name, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	s.t.Helper()
	var last *batchv1.Job
	if err := wait.PollUntilContextTimeout(s.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		j, err := s.kube.BatchV1().Jobs(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		last = j
		return err == nil && cond(j), err
	}); err != nil {
		s.t.Fatalf("%s not %s: %v (status %+v; simulator: %s)", name, what, err, last.Status, s.log.String())
	}
	return last
}

// stillRunning fails unless the Job stays running, not finished, for the
// whole of d: a held Job runs past its time.
func (s *simEnv) stillRunning(ctx context.Context, name string, d time.Duration) {
	s.t.Helper()
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if time.Since(start) >= d {
			return true, nil
		}
		j, err := s.kube.BatchV1().Jobs(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if jobstatus.Finished(j.Status) {
			return false, fmt.Errorf("held Job %s finished before its release: %+v", name, j.Status)
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}
