//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// `jobferry-dev up` works from outside the checkout, without
// JOBFERRY_BIN_DIR (which only the Makefile sets): it finds the binaries next
// to itself, starts the clusters, and `jobferry-dev down` stops them all.
func TestDevUpOutsideTheCheckout(t *testing.T) {
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	jobferry := filepath.Join(bin, "jobferry-dev")
	elsewhere := t.TempDir()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, localcluster.BinDirEnv+"=") })
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), jobferry, args...)
		cmd.Dir, cmd.Env = elsewhere, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("jobferry-dev %s in %s: %v\n%s", strings.Join(args, " "), elsewhere, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(jobferry, "down", "--dir", filepath.Join(elsewhere, "dev"))
		cmd.Dir, cmd.Env = elsewhere, env
		_ = cmd.Run()
	})
	up := run("up", "--workers", "1", "--dir", filepath.Join(elsewhere, "dev"))
	if want := filepath.Join(bin, "kubectl") + " --kubeconfig"; !strings.Contains(up, want) {
		t.Errorf("up's hint does not name the kubectl next to it (%s):\n%s", want, up)
	}
	status := run("status", "--dir", filepath.Join(elsewhere, "dev"))
	if strings.Count(status, "running") < 8 || strings.Contains(status, "stopped") {
		t.Errorf("status after up:\n%s", status)
	}
	if down := run("down", "--dir", filepath.Join(elsewhere, "dev")); !strings.Contains(down, "stopped 2 cluster(s)") {
		t.Errorf("down: %s", down)
	}
}
