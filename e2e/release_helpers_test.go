//go:build e2e

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobferry/jobferry/e2e/localcluster"
)

// testRelease is the release `make release-e2e` wrote for this machine's
// platform: what the real-node tier publishes and installs.
type testRelease struct {
	dir, version string
}

// e2eRelease finds it under _output/release-e2e.
func e2eRelease(t *testing.T) testRelease {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "release-e2e")
	charts, _ := filepath.Glob(filepath.Join(dir, "jobferry-manager-*.tgz"))
	if len(charts) != 1 {
		t.Fatalf("%s holds %d manager charts, want one: run `make release-e2e`", dir, len(charts))
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(charts[0]), "jobferry-manager-"), ".tgz")
	return testRelease{dir: dir, version: version}
}

// plugin extracts the release's plugin for this platform from its archive
// and returns its path.
func (r testRelease) plugin(t *testing.T) string {
	t.Helper()
	archive := filepath.Join(r.dir, fmt.Sprintf("kubectl-jobferry_%s_%s_%s.tar.gz", r.version, runtime.GOOS, runtime.GOARCH))
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no kubectl-jobferry", archive)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "kubectl-jobferry" {
			continue
		}
		path := filepath.Join(t.TempDir(), "kubectl-jobferry")
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// makeTarget runs a target of the repository's Makefile, as a user would.
func makeTarget(ctx context.Context, t *testing.T, target string, vars ...string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, "make", append([]string{"-C", root, "--no-print-directory", target}, vars...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s %s: %v\n%s", target, strings.Join(vars, " "), err, out)
	}
	return string(out)
}

// registryPullSecret is the Secret the charts' pods pull the local
// registry's images with (imagePullSecrets).
const registryPullSecret = "jobferry-registry"

// pullSecret creates, in namespace ns of the cluster (created if missing),
// the Secret of the registry's credentials a kubelet pulls with, as
// `kubectl create secret docker-registry` does.
func pullSecret(ctx context.Context, t *testing.T, kubeconfig, ns string, reg *localcluster.Registry) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: registryPullSecret},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: reg.DockerConfig()},
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkPulledFrom waits for the kubelet's Pulled Event of the pod's image:
// pulled from the registry, or already present on the node (a replica on
// the same node as one that pulled it). It reports whether this pod pulled.
func checkPulledFrom(ctx context.Context, t *testing.T, c kubernetes.Interface, pod corev1.Pod, image string) (pulled bool) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != "Pulled" || !strings.Contains(e.Message, `"`+image+`"`) {
				continue
			}
			pulled = strings.HasPrefix(e.Message, "Successfully pulled image")
			return pulled || strings.Contains(e.Message, "already present on machine"), nil
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("pod %s: no Pulled Event of %s within 30s: %v; its Events:\n%s", pod.Name, image, err, strings.Join(seen, "\n"))
	}
	return pulled
}
