//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

var gpuTaint = corev1.Taint{Key: "jobferry.dev/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// twoPoolWorker has an untainted general pool and a tainted gpu pool.
func twoPoolWorker(name string) localcluster.Spec {
	return localcluster.Spec{Name: name, Pools: []localcluster.Pool{
		{Name: "general", Nodes: 2},
		{Name: "gpu", Nodes: 2, Labels: map[string]string{"accelerator": "fake-gpu"}, Taints: []corev1.Taint{gpuTaint}},
	}}
}

// The stack is real: the pinned kube-apiserver reports its version, the real
// scheduler honours a nodeSelector and a toleration, and the real Job
// controller runs a parallel Job to Complete on KWOK's fake nodes.
func TestJobRunsToCompleteOnSelectedPool(t *testing.T) {
	cluster, client := startCluster(t, twoPoolWorker("worker"))
	ctx := t.Context()

	version, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if version.GitVersion != "v1.36.3" {
		t.Errorf("kube-apiserver reports %q, want v1.36.3 (built without version ldflags?)", version.GitVersion)
	}

	ns := createNamespace(ctx, t, client)
	job := sleepJob(ns, "on-gpu", 500*time.Millisecond)
	job.Spec.Completions = ptr.To[int32](4)
	job.Spec.Parallelism = ptr.To[int32](2)
	job.Spec.Template.Spec.NodeSelector = map[string]string{"jobferry.dev/pool": "gpu"}
	job.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpEqual, Value: gpuTaint.Value, Effect: gpuTaint.Effect}}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	done := pollJob(ctx, t, client, ns, job.Name, 2*time.Minute, "Complete", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	if done.Status.Succeeded != 4 || done.Status.Failed != 0 {
		t.Errorf("finished with %s, want succeeded=4 failed=0", describeStatus(done))
	}
	pods := jobPods(ctx, t, client, ns, job.Name)
	if len(pods) != 4 {
		t.Errorf("Job left %d pods, want 4", len(pods))
	}
	for _, pod := range pods {
		node, err := client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s on node %q: %v", pod.Name, pod.Spec.NodeName, err)
		}
		if pool := node.Labels["jobferry.dev/pool"]; pool != "gpu" {
			t.Errorf("pod %s ran on node %s of pool %q, want pool gpu", pod.Name, node.Name, pool)
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s ended in phase %s, want Succeeded", pod.Name, pod.Status.Phase)
		}
	}
	t.Logf("cluster logs in %s", cluster.LogDir())
}

// With podReplacementPolicy Failed, a deleted pod counts as terminating, and
// the real Job controller creates no replacement until the pod is terminal,
// which only the terminating stage of localcluster's KWOK config makes happen.
func TestPodReplacementPolicyFailedWaitsForTerminalPod(t *testing.T) {
	_, client := startCluster(t, twoPoolWorker("worker"))
	ctx := t.Context()
	ns := createNamespace(ctx, t, client)

	job := sleepJob(ns, "replace-failed", time.Hour)
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	job.Spec.Template.Annotations[terminateDelayAnnotation] = "3s"
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, client, ns, job.Name, time.Minute, "one ready pod", func(j *batchv1.Job) bool {
		return j.Status.Active == 1 && ptr.Deref(j.Status.Ready, 0) == 1
	})
	pods := jobPods(ctx, t, client, ns, job.Name)
	if len(pods) != 1 {
		t.Fatalf("want 1 pod, got %d", len(pods))
	}
	victim := pods[0]
	if !slices.Contains(victim.Finalizers, batchv1.JobTrackingFinalizer) {
		t.Fatalf("pod %s lacks the %s finalizer: %v", victim.Name, batchv1.JobTrackingFinalizer, victim.Finalizers)
	}

	// Watch from the listed state, so every later pod change is seen in order.
	podList, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: podList.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	if err := client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating := pollJob(ctx, t, client, ns, job.Name, 30*time.Second, "terminating=1", func(j *batchv1.Job) bool {
		return ptr.Deref(j.Status.Terminating, 0) == 1
	})
	if terminating.Status.Active != 0 || terminating.Status.Failed != 0 {
		t.Errorf("while the pod terminates: %s, want active=0 failed=0", describeStatus(terminating))
	}
	if got := len(jobPods(ctx, t, client, ns, job.Name)); got != 1 {
		t.Errorf("while the pod terminates there are %d pods, want only the terminating one", got)
	}

	// Replay pod events in order: the replacement must be created only after
	// the deleted pod reached phase Failed.
	victimFailed := false
	deadline := time.After(time.Minute)
	for replaced := false; !replaced; {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("pod watch closed")
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			switch {
			case pod.UID == victim.UID && pod.Status.Phase == corev1.PodFailed:
				victimFailed = true
			case pod.UID != victim.UID && ev.Type == watch.Added:
				if !victimFailed {
					t.Errorf("replacement %s created while %s was still terminating", pod.Name, victim.Name)
				}
				replaced = true
			}
		case <-deadline:
			t.Fatalf("no replacement pod within a minute (deleted pod reached Failed: %v)", victimFailed)
		}
	}
	after := pollJob(ctx, t, client, ns, job.Name, 30*time.Second, "replacement active, old pod counted failed", func(j *batchv1.Job) bool {
		return j.Status.Active == 1 && j.Status.Failed == 1 && ptr.Deref(j.Status.Terminating, 0) == 0
	})
	t.Logf("after replacement: %s", describeStatus(after))
}

// A pod failed on demand through KWOK's chaos stage is counted as failed and,
// with backoffLimit 0, fails the Job.
func TestChaosFailedPodIsCounted(t *testing.T) {
	_, client := startCluster(t, twoPoolWorker("worker"))
	ctx := t.Context()
	ns := createNamespace(ctx, t, client)

	job := sleepJob(ns, "chaos", time.Hour)
	job.Spec.BackoffLimit = ptr.To[int32](0)
	job.Spec.Template.Labels = map[string]string{failPodLabel: "true"}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := pollJob(ctx, t, client, ns, job.Name, time.Minute, "Failed", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobFailed) != nil
	})
	if failed.Status.Failed != 1 || failed.Status.Succeeded != 0 {
		t.Errorf("finished with %s, want failed=1 succeeded=0", describeStatus(failed))
	}
	if cond := hasCondition(failed, batchv1.JobFailed); cond.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("Failed condition reason %q, want %q", cond.Reason, batchv1.JobReasonBackoffLimitExceeded)
	}
	if hasCondition(failed, batchv1.JobFailureTarget) == nil {
		t.Errorf("no FailureTarget condition next to Failed: %s", describeStatus(failed))
	}
}
