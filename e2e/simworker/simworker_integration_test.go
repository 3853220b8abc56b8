//go:build integration

package simworker

import (
	"context"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/localcluster"
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
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../../api/v1alpha1/crds"}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (KUBEBUILDER_ASSETS must point at bin/; run `make tools`): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(cfg)
	log := &syncLog{}
	opts := Options{Timing: Timing{Start: 100 * time.Millisecond, RunFor: 200 * time.Millisecond}, Publish: 100 * time.Millisecond, Heartbeat: time.Second, Concurrency: 2, Log: log}
	pool := localcluster.Pool{Name: "general", Nodes: 2, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}}
	simCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(simCtx, []Target{{Name: "sim", Config: cfg, Pools: []localcluster.Pool{pool}}}, opts)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	job := func(name string, mutate func(*batchv1.Job)) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}, Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/sim:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
			}}}},
		}}
		if mutate != nil {
			mutate(j)
		}
		if _, err := c.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(name, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
		t.Helper()
		var last *batchv1.Job
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			j, err := c.BatchV1().Jobs(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
			last = j
			return err == nil && cond(j), err
		}); err != nil {
			t.Fatalf("%s not %s: %v (status %+v; simulator: %s)", name, what, err, last.Status, log.String())
		}
		return last
	}
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
