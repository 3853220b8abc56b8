//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// A real node leaves nothing on the host once its environment is gone:
// interrupted while starting (Ctrl-C: the starting program stops what it
// started), or crashed with a container running (every node process
// SIGKILLed; `jobferry-dev down` cleans up from what is on disk).
func TestRealNodeTeardownLeavesNothing(t *testing.T) {
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RealNodesUnavailable(bin); err != nil {
		t.Fatalf("the real-node tier cannot run here: %v", err)
	}
	jobferry := filepath.Join(bin, "jobferry-dev")
	tunablesBefore, err := localcluster.KernelTunables()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("interrupted while starting", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "dev")
		cmd := exec.CommandContext(t.Context(), jobferry, "up", "--real-nodes", "--workers", "1", "--dir", dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Interrupted once its node's containerd holds the images: a
		// network, cgroups, mounts and a daemon to undo.
		var output strings.Builder
		interrupted := false
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			output.WriteString(scanner.Text() + "\n")
			if !interrupted && strings.Contains(scanner.Text(), "starting the kubelet and kube-proxy") {
				index := networkIndex(t, dir)
				t.Cleanup(func() { assertNoLeftovers(t, dir, index) })
				t.Cleanup(func() { devDown(t, jobferry, dir) })
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				interrupted = true
			}
		}
		err = cmd.Wait()
		if !interrupted {
			t.Fatalf("up never reached its node's kubelet (%v):\n%s", err, output.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
			t.Errorf("up exited %d after SIGINT, want %d:\n%s", code, 128+int(syscall.SIGINT), output.String())
		}
	})

	t.Run("crashed with a container running", func(t *testing.T) {
		// Started as `up --real-nodes --release` does (a registry, the
		// charts as pods), so the crash leaves those too.
		dir := filepath.Join(t.TempDir(), "dev")
		release, err := devenv.E2EReleaseDir()
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(t.Context(), jobferry, "up", "--real-nodes", "--release", release, "--workers", "1", "--dir", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("up --release: %v\n%s", err, out)
		}
		index := networkIndex(t, dir)
		t.Cleanup(func() { assertNoLeftovers(t, dir, index) })
		t.Cleanup(func() { devDown(t, jobferry, dir) })
		reg, err := localcluster.LoadRegistry(filepath.Join(dir, "registry"))
		if err != nil || reg == nil {
			t.Fatalf("up --release recorded no registry (%v):\n%s", err, out)
		}
		manager := clientFor(t, filepath.Join(dir, "manager", "kubeconfig"))
		pods, err := manager.CoreV1().Pods(devenv.SystemNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=jobferry-manager"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("up --release runs no manager pod:\n%s", out)
		}
		for _, p := range pods.Items {
			if image := p.Spec.Containers[0].Image; !strings.HasPrefix(image, reg.Host+"/jobferry/jobferry-manager:") {
				t.Errorf("manager pod %s runs %s, not the image from the registry %s", p.Name, image, reg.Host)
			}
		}
		joined := &v1alpha1.WorkerCluster{}
		managerConfig, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "manager", "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		managerClient, err := client.New(managerConfig, client.Options{Scheme: v1alpha1.NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := managerClient.Get(t.Context(), client.ObjectKey{Name: "worker-1"}, joined); err != nil {
			t.Errorf("up --release joined no worker-1: %v", err)
		}
		t.Logf("jobferry-dev up --real-nodes --release %s --workers 1:\n%s", release, out)
		worker := clientFor(t, filepath.Join(dir, "worker-1", "kubeconfig"))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sleeper"},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: localcluster.BusyboxImage, Command: []string{"sleep", "3600"}}},
				// Gone at once on a SIGTERM: nothing waits for it.
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		}
		if _, err := worker.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodRunning(t.Context(), t, worker, "default", "sleeper", 2*time.Minute)
		// The crash: every process of the environment SIGKILLed at once,
		// the node's daemons first, so its container and shim are orphaned.
		processes, err := localcluster.LoadEnvironment(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range processes {
			for _, p := range c.Processes {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		devDown(t, jobferry, dir)
	})

	// What the kubelets changed host-wide is put back by the last
	// environment with real nodes to stop: these were the only ones, unless
	// another ran meanwhile (a developer's).
	if others := hostLedgerHolders(t); len(others) == 0 {
		after, err := localcluster.KernelTunables()
		if err != nil {
			t.Fatal(err)
		}
		for name, before := range tunablesBefore {
			if after[name] != before {
				t.Errorf("%s is %s after the environments stopped, was %s", name, after[name], before)
			}
		}
	} else {
		t.Logf("host tunables not compared: environments %v still hold the host", others)
	}
}

// devDown runs `jobferry-dev down` (a no-op on an environment already
// gone), failing the test with its output.
func devDown(t *testing.T, jobferry, dir string) {
	t.Helper()
	if out, err := exec.Command(jobferry, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Errorf("jobferry-dev down --dir %s: %v\n%s", dir, err, out)
	}
}

// networkIndex is the index of the host network an environment records.
func networkIndex(t *testing.T, envDir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(envDir, "network.json"))
	if err != nil {
		t.Fatalf("the environment recorded no host network: %v", err)
	}
	var n localcluster.HostNetwork
	if err := json.Unmarshal(data, &n); err != nil {
		t.Fatal(err)
	}
	return n.Index
}

// assertNoLeftovers fails with whatever the environment left on the host,
// polling briefly: the kernel frees a network namespace's interfaces a
// moment after its last reference goes.
func assertNoLeftovers(t *testing.T, envDir string, index int) {
	t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		left, err = localcluster.HostLeftovers(envDir, index)
		return len(left) == 0, err
	})
	if err != nil {
		t.Errorf("the environment in %s left on the host (%v):\n  %s", envDir, err, strings.Join(left, "\n  "))
	}
}

// hostLedgerHolders are the environments holding the host's ledger of real
// nodes now.
func hostLedgerHolders(t *testing.T) []string {
	t.Helper()
	holders, err := localcluster.HostLedgerHolders()
	if err != nil {
		t.Fatal(err)
	}
	return holders
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// waitPodRunning waits for the pod's containers to run, failing with its
// status and Events.
func waitPodRunning(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pod
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not running: %v\n%s", ns, name, err, describePod(ctx, c, last))
	}
}

// describePod is a pod's phase, container states and Events, for a failure.
func describePod(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod) string {
	if pod == nil {
		return "(no pod)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s on %q", pod.Status.Phase, pod.Spec.NodeName)
	for _, s := range pod.Status.ContainerStatuses {
		fmt.Fprintf(&b, "\n  container %s: %+v", s.Name, s.State)
	}
	events, err := c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  event %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}
