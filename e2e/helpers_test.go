//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/devtools/simworker"
	"github.com/jobferry/jobferry/internal/installation"
)

// Pod annotations and labels understood by the KWOK stages of localcluster.
const (
	completeDelayAnnotation  = simworker.RunForAnnotation
	readyDelayAnnotation     = "pod-ready.stage.kwok.x-k8s.io/delay"
	terminateDelayAnnotation = "pod-terminate.stage.kwok.x-k8s.io/delay"
	failPodLabel             = simworker.FailLabel
)

// outputDir is a fresh directory for one test's clusters under _output/e2e,
// kept after the run so component logs can be read when a test fails.
func outputDir(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "e2e", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startCluster starts a cluster for this test and stops it when the test ends.
func startCluster(t *testing.T, spec localcluster.Spec) (*localcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, spec, localcluster.Options{Dir: filepath.Join(outputDir(t), spec.Name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

// createNamespace creates a namespace named after the test.
func createNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	ns, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// managerID is the installation ID of the manager running in namespace
// managerNS (v1alpha1.ManagerIDLabel on its mirrors), read as it reads it.
func managerID(ctx context.Context, t *testing.T, managerCluster client.Reader, managerNS string) string {
	t.Helper()
	id, err := installation.ID(ctx, managerCluster, managerNS)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// acceptingNamespace creates namespace name on a worker as its
// administrator makes one of their own that takes the manager's Jobs:
// labelled v1alpha1.AcceptsManagerLabel(its ID)=true (and labels).
func acceptingNamespace(ctx context.Context, t *testing.T, worker kubernetes.Interface, name, managerID string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.AcceptsManagerLabel(managerID): v1alpha1.AcceptsManagerValue}}}
	maps.Copy(ns.Labels, labels)
	if _, err := worker.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sleepJob is a Job whose pods run for runFor under KWOK.
func sleepJob(namespace, name string, runFor time.Duration) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{completeDelayAnnotation: runFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "main",
						Image: "registry.example/sleep:1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resourceQuantity("100m"),
						}},
					}},
				},
			},
			BackoffLimit: ptr.To[int32](6),
		},
	}
}

// pollJob polls the Job until cond holds; the failure shows the last status.
func pollJob(ctx context.Context, t *testing.T, client kubernetes.Interface, namespace, name string, timeout time.Duration, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var last *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = job
		return cond(job), nil
	})
	if err != nil {
		t.Fatalf("waiting for Job %s/%s: %s: %v; last status: %s", namespace, name, what, err, describeStatus(last))
	}
	return last
}

func describeStatus(job *batchv1.Job) string {
	if job == nil {
		return "<none>"
	}
	s := job.Status
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("active=%d ready=%d terminating=%d succeeded=%d failed=%d conditions=%v",
		s.Active, ptr.Deref(s.Ready, 0), ptr.Deref(s.Terminating, 0), s.Succeeded, s.Failed, conds)
}

func hasCondition(job *batchv1.Job, condType batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == condType && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func jobPods(ctx context.Context, t *testing.T, client kubernetes.Interface, namespace, jobName string) []corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + jobName})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// stopComponent stops one component of a cluster (its API server, its
// scheduler) for a test, and returns what starts it again; if the test ends
// without, its cleanup starts it, so the next test finds the cluster whole.
func stopComponent(t *testing.T, cluster *localcluster.Cluster, component string) (restart func()) {
	t.Helper()
	if err := cluster.StopComponent(component); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if !stopped {
			return
		}
		if _, err := cluster.RestartComponent(component); err != nil {
			t.Errorf("restarting %s of %s after the test: %v", component, cluster.Name, err)
		}
	})
	return func() {
		t.Helper()
		if _, err := cluster.RestartComponent(component); err != nil {
			t.Fatal(err)
		}
		stopped = false
	}
}
