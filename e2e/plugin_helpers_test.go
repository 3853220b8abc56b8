//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/follow"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// mergedKubeconfig writes devenv.MergedKubeconfig at path and returns it.
func mergedKubeconfig(t *testing.T, env *localcluster.Environment, path string) string {
	t.Helper()
	if err := devenv.MergedKubeconfig(env, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// pluginBinaries is the plugin a user's kubeconfig runs when it is not
// bin/kubectl-jobferry (usePlugin): the real-node tier's user runs the
// release's.
var pluginBinaries sync.Map

// usePlugin makes every plugin command run with kubeconfig run binary.
func usePlugin(kubeconfig, binary string) { pluginBinaries.Store(kubeconfig, binary) }

// pluginBinary is the plugin run with kubeconfig.
func pluginBinary(t *testing.T, kubeconfig string) string {
	t.Helper()
	if binary, ok := pluginBinaries.Load(kubeconfig); ok {
		return binary.(string)
	}
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(bin, "kubectl-jobferry")
}

// plugin runs bin/kubectl-jobferry as a user would; it returns the output
// and the error of a command that failed.
func plugin(ctx context.Context, t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	stdout, stderr, err := pluginOutputs(ctx, t, kubeconfig, args...)
	if err != nil {
		return stdout + stderr, err
	}
	return stdout, nil
}

// pluginOutputs runs a plugin command and returns what it wrote to each
// stream (warnings go to stderr).
func pluginOutputs(ctx context.Context, t *testing.T, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, pluginBinary(t, kubeconfig), append(args, "--kubeconfig", kubeconfig)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("kubectl jobferry %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}

// startPlugin starts a plugin command that streams until stopped, its
// output gathered as it comes.
func startPlugin(ctx context.Context, t *testing.T, kubeconfig string, args ...string) (*exec.Cmd, *follow.Buffer, *strings.Builder) {
	t.Helper()
	cmd := exec.CommandContext(ctx, pluginBinary(t, kubeconfig), append(args, "--kubeconfig", kubeconfig)...)
	stdout, stderr := &follow.Buffer{}, &strings.Builder{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// followPlugin runs a plugin command that streams until stopped (logs -f),
// waits up to 30 s for its output to reach want, stops it and returns what
// it printed.
func followPlugin(ctx context.Context, t *testing.T, kubeconfig, want string, args ...string) string {
	t.Helper()
	cmd, stdout, stderr := startPlugin(ctx, t, kubeconfig, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("kubectl jobferry %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
			}
			return stdout.String()
		case <-tick.C:
			if stdout.String() != want {
				continue
			}
		case <-deadline.C:
		}
		_ = cmd.Process.Kill()
		<-done
		return stdout.String()
	}
}

// watchPlugin runs a plugin command that streams until stopped (get
// --watch): each time its output has become the next of wants it calls
// then (to make the change the next output shows), and once it printed the
// last, it is stopped; it fails the test when an output does not come
// within 30 s.
func watchPlugin(ctx context.Context, t *testing.T, kubeconfig string, args []string, wants []string, then func(step int)) {
	t.Helper()
	cmd, stdout, stderr := startPlugin(ctx, t, kubeconfig, args...)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for step, want := range wants {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return stdout.String() == want, nil
		})
		if err != nil {
			t.Fatalf("kubectl jobferry %s printed\n%s%s\nwant\n%s", strings.Join(args, " "), stdout.String(), stderr.String(), want)
		}
		if step < len(wants)-1 {
			then(step)
		}
	}
}

// mustPlugin runs the plugin and fails the test when it fails.
func mustPlugin(ctx context.Context, t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := plugin(ctx, t, kubeconfig, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tokenHistory records every token written into the workers' kubeconfig
// Secrets on the manager, in order, per Secret.
type tokenHistory struct {
	mu     sync.Mutex
	tokens map[string][]string // Secret name -> tokens in the order written
	// unchanged counts Secret updates that kept the token.
	unchanged map[string]int
}

// watchTokens follows the Secrets of namespace ns until ctx ends.
func watchTokens(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) *tokenHistory {
	t.Helper()
	h := &tokenHistory{tokens: map[string][]string{}, unchanged: map[string]int{}}
	w, err := c.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			secret, ok := e.Object.(*corev1.Secret)
			if !ok || (e.Type != watch.Added && e.Type != watch.Modified) || secret.Data["kubeconfig"] == nil {
				continue
			}
			cfg, err := clientcmd.Load(secret.Data["kubeconfig"])
			if err != nil {
				continue
			}
			token := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
			h.mu.Lock()
			seen := h.tokens[secret.Name]
			if len(seen) > 0 && seen[len(seen)-1] == token {
				h.unchanged[secret.Name]++
			} else {
				h.tokens[secret.Name] = append(seen, token)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// count returns how many distinct tokens a Secret has held in a row.
func (h *tokenHistory) count(secret string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tokens[secret])
}
