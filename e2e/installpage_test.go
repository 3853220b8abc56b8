//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// pageRegistry is the registry the install page names; the test's own
// stands in for it.
const pageRegistry = "registry.example.com/jobferry"

// installPageBlock says what TestInstallPage does with one command block
// of docs/getting-started/install.md, in the page's order: run it as
// written, find every word of it in the short path the test runs (a step
// the short path takes, with its values), or not run it, saying why.
type installPageBlock struct {
	starts  string
	run     bool
	covered bool
	why     string
}

var installPageBlocks = []installPageBlock{
	{starts: "make release VERSION=0.1.0 && make publish", run: true},
	{starts: "skopeo copy", why: "skopeo is not among the test's tools; make publish, which the short path runs, pushes the same archives"},
	{starts: "helm install jobferry-manager", covered: true},
	{starts: "helm install jobferry-worker", covered: true},
	{starts: "kubectl jobferry join worker-1", covered: true},
	{starts: "kubectl label namespace team-a accepts-manager.jobferry.dev/", why: "the reader fills in the manager's ID; the short path lets the manager create the namespace instead, and TestInstallWithChartsLeastPrivilege (another-teams-namespace) sets this label"},
	{starts: "kubectl --context manager label namespace team-a", covered: true},
	{starts: "cat > ~/bin/kubectl_complete-jobferry", run: true},
	{starts: "make publish VERSION=0.1.0 REGISTRY=", covered: true},
	{starts: "helm install jobferry-manager oci://registry.example.com/jobferry/charts/jobferry-manager --version 0.1.0", covered: true},
}

// The install page works as written on clusters with real nodes: its short
// path — build and publish a release, install both charts from the
// registry, join the worker, opt a namespace in, create a Job — runs in one
// shell as a platform engineer types it, and the Job runs on the worker
// and says hello; the shell-completion block completes that Job's name.
// Every other block is one the short path covers (each of its words is in
// the short path) or says why it is not run.
//
// What stands in for the reader's site: the test's registry for
// registry.example.com (the one word changed); a kubeconfig with contexts
// manager and worker-1; the registry's CA as the system's (SSL_CERT_FILE)
// and its credentials as `docker login` writes them; nodes configured as a
// platform configures them for a private registry and a Docker Hub mirror
// (localcluster.PullLikeAPlatformsNodes: the page's pods have no pull
// Secret, its Job runs `busybox`); the release built for linux/amd64 only
// and into a directory of the test (IMAGE_PLATFORMS, PLUGIN_PLATFORMS,
// RELEASE_DIR in the environment, for time), from a checkout that may be
// dirty (RELEASE_ALLOW_DIRTY).
func TestInstallPage(t *testing.T) {
	ctx := t.Context()
	bin, release := realNodeTier(t)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, filepath.Join(root, "docs", "getting-started", "install.md"))
	if len(blocks) != len(installPageBlocks) {
		t.Fatalf("the install page has %d command blocks, the test knows %d: say what the test does with each (installPageBlocks)", len(blocks), len(installPageBlocks))
	}
	for i, b := range installPageBlocks {
		if !strings.HasPrefix(strings.TrimSpace(blocks[i]), b.starts) {
			t.Fatalf("the install page's block %d starts %q, not %q: say what the test does with it (installPageBlocks)", i+1, firstLine(blocks[i]), b.starts)
		}
	}
	shortPath := blocks[0]
	for i, b := range installPageBlocks {
		if !b.covered {
			continue
		}
		words := commandWords(strings.ReplaceAll(shortPath, pageRegistry, "$R"))
		for _, word := range commandWords(strings.ReplaceAll(blocks[i], pageRegistry, "$R")) {
			if !slices.Contains(words, word) {
				t.Errorf("the install page's block %d (%s) has %q, which its short path does not: a step the short path does not take", i+1, firstLine(blocks[i]), word)
			}
		}
	}

	dir := outputDir(t)
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	env, err := localcluster.StartEnvironment(startCtx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", RealNode: true},
		Workers: devenv.RealNodeWorkers(1),
	}, localcluster.EnvironmentOptions{Dir: dir, BinDir: bin, Registry: true})
	if err != nil {
		t.Fatal(err)
	}
	index := env.Network.Index
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
		assertNoLeftovers(t, dir, index)
	})
	reg := env.Registry
	for _, c := range env.Clusters() {
		if err := c.PullLikeAPlatformsNodes(reg); err != nil {
			t.Fatal(err)
		}
	}
	// Docker Hub's busybox, as the mirror serves it.
	if err := reg.PushImage(ctx, filepath.Join(bin, "nodes", "images", localcluster.NodeImageArchive(localcluster.BusyboxImage)), reg.Host+"/library/busybox:latest"); err != nil {
		t.Fatal(err)
	}

	// The reader's machine: kubectl, helm and the release's plugin on the
	// PATH, a kubeconfig of both clusters, the registry trusted and logged
	// in to.
	home := filepath.Join(dir, "home")
	path := filepath.Join(dir, "path")
	for _, d := range []string{filepath.Join(home, "bin"), path, filepath.Join(home, ".docker")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plugin, err := release.ExtractPlugin(filepath.Join(dir, "release-bin"))
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": filepath.Join(bin, "kubectl"), "helm": filepath.Join(bin, "helm"), "kubectl-jobferry": plugin} {
		if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), reg.DockerConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := devenv.MergedKubeconfig(env, kubeconfig); err != nil {
		t.Fatal(err)
	}
	// Go's caches stay where they are (HOME moves): the release builds
	// what make test has built, from its cache.
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	goDirs := strings.Fields(string(goEnv))
	if len(goDirs) != 3 {
		t.Fatalf("go env GOCACHE GOMODCACHE GOPATH: %q", goEnv)
	}
	shellEnv := append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "PATH=")
	}), "HOME="+home, "PATH="+filepath.Join(home, "bin")+":"+path+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
		"SSL_CERT_FILE="+reg.CAFile(), "GOCACHE="+goDirs[0], "GOMODCACHE="+goDirs[1], "GOPATH="+goDirs[2],
		"RELEASE_DIR="+filepath.Join(dir, "release"), "IMAGE_PLATFORMS=linux/amd64", "PLUGIN_PLATFORMS=linux/amd64", "RELEASE_ALLOW_DIRTY=true")
	shell := func(what, script string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
		cmd.Dir, cmd.Env = root, shellEnv
		started := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("%s, run as written (%s):\n%s", what, time.Since(started).Round(time.Second), out)
		if err != nil {
			t.Fatalf("%s failed: %v", what, err)
		}
		return string(out)
	}

	out := shell("the install page's short path", strings.ReplaceAll(shortPath, pageRegistry, reg.Host+"/jobferry"))
	// Its last two commands wait for the Job and print its log.
	if !strings.HasSuffix(out, "job.batch/hello condition met\nhello\n") {
		t.Errorf("the short path does not end with Job hello complete and its log, hello")
	}

	// Step 8's check, then the Job: dispatched to worker-1.
	shell("step 8's check", "kubectl --context manager wait --for=condition=Ready workercluster --all --timeout=2m")
	admin, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	hello := pollJob(ctx, t, admin, "team-a", "hello", time.Minute, "Complete", func(j *batchv1.Job) bool { return j.Status.Succeeded == 1 })
	if hello.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" {
		t.Errorf("Job hello ran on %q, want worker-1", hello.Annotations[v1alpha1.WorkerAnnotation])
	}
	for _, c := range env.Clusters() {
		kube, err := kubernetes.NewForConfig(c.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		pods, err := kube.CoreV1().Pods(devenv.SystemNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if image := p.Spec.Containers[0].Image; !strings.HasPrefix(image, reg.Host+"/jobferry/jobferry-") || !strings.HasSuffix(image, ":"+release.Version) {
				t.Errorf("%s: pod %s runs %s, not an image of the published release", c.Name, p.Name, image)
			}
		}
	}

	// Shell completion: the page's block writes the completion executable
	// into ~/bin (on this PATH); kubectl's completion of the plugin calls it.
	shell("the shell completion block", blocks[7])
	if completed := shell("completing a Job's name", "kubectl_complete-jobferry describe job --context manager -n team-a ''"); !strings.Contains(completed, "hello") {
		t.Errorf("completion of describe job in team-a offers no hello:\n%s", completed)
	}
	for i, b := range installPageBlocks {
		if b.why != "" {
			t.Logf("block %d (%s) not run: %s", i+1, firstLine(blocks[i]), b.why)
		}
	}
}

// firstLine is a block's first line, to name it.
func firstLine(block string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(block), "\n")
	return fmt.Sprintf("%.60s", line)
}

// commandWords are the words of a block's commands: not its comments or
// line continuations.
func commandWords(block string) []string {
	var words []string
	for _, line := range strings.Split(block, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ') {
			line = line[:i]
		}
		for _, word := range strings.Fields(line) {
			if word != "\\" {
				words = append(words, word)
			}
		}
	}
	return words
}
