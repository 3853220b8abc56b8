//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// shellBlocks are the ```sh blocks of a Markdown page, in order; a block
// indented under a list item is taken without its indentation.
func shellBlocks(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^([ \t]*)```sh\n(.*?)^[ \t]*```").FindAllStringSubmatch(string(data), -1) {
		indent, block := m[1], m[2]
		var lines []string
		for _, line := range strings.SplitAfter(block, "\n") {
			lines = append(lines, strings.TrimPrefix(line, indent))
		}
		blocks = append(blocks, strings.Join(lines, ""))
	}
	return blocks
}

// The quick start works as written: its command blocks, run in order in one
// shell from the checkout's root as a reader types them, start the local
// clusters, dispatch the Job to Complete, show where it ran and stop. All
// but the first (make tools build): make test has built what it builds, and
// make tools would stop the background build of the tools later e2e tests
// use (hack/tools/build-late.sh); the page says so.
func TestQuickStart(t *testing.T) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, filepath.Join(root, "docs", "getting-started", "quick-start.md"))
	if len(blocks) != 5 || strings.TrimSpace(blocks[0]) != "make tools build" {
		t.Fatalf("the quick start has %d command blocks, the first %q; want its 5 steps', the first make tools build", len(blocks), blocks[0])
	}
	blocks = blocks[1:]
	// The page starts the environment in .local/dev, where a developer's
	// may already run: it is not stopped behind their back.
	if status, err := exec.Command(filepath.Join(root, "bin", "jobferry-dev"), "status", "--dir", filepath.Join(root, ".local", "dev")).CombinedOutput(); err == nil && strings.Contains(string(status), "running") {
		t.Fatalf("a local environment runs in .local/dev; stop it (make dev-down) to run the quick start:\n%s", status)
	}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(root, "bin", "jobferry-dev"), "down")
		cmd.Dir = root
		_ = cmd.Run()
	})
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") })
	out, err := cmd.CombinedOutput()
	t.Logf("the quick start, run as written:\n%s", out)
	if err != nil {
		t.Fatalf("the quick start failed: %v", err)
	}
	for _, want := range []string{"worker-1", "worker-2", "job.batch/hello condition met", "WORKER", "Dispatched", "stopped 3 cluster(s)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quick start's output has no %q", want)
		}
	}
}
