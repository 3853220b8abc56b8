package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pendingBuild lays out what hack/tools/build-late.sh leaves in a bin
// directory while it builds tool: its marker and the PID of the build (a
// live sleep, or a PID that is gone).
func pendingBuild(t *testing.T, tool string, alive bool) (binDir string, builder *exec.Cmd) {
	t.Helper()
	binDir = t.TempDir()
	pending := filepath.Join(binDir, ".pending")
	if err := os.MkdirAll(pending, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pending, strings.ReplaceAll(tool, "/", "__")), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	builder = exec.Command("sleep", "60")
	if err := builder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = builder.Process.Kill(); _ = builder.Wait() })
	if !alive {
		_ = builder.Process.Kill()
		_ = builder.Wait()
	}
	if err := os.WriteFile(filepath.Join(pending, "pid"), []byte(strconv.Itoa(builder.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return binDir, builder
}

// A test needing a tool the background build has not built yet waits for it,
// and gets it once built.
func TestRequireBinariesWaitsForTheBackgroundBuild(t *testing.T) {
	binDir, _ := pendingBuild(t, "kubernetes-1.32/kube-apiserver", true)
	built := make(chan struct{})
	go func() {
		defer close(built)
		time.Sleep(300 * time.Millisecond) // the build taking its time, on purpose
		_ = os.MkdirAll(filepath.Join(binDir, "kubernetes-1.32"), 0o755)
		_ = os.WriteFile(filepath.Join(binDir, "kubernetes-1.32", "kube-apiserver"), []byte("#!/bin/sh\n"), 0o755)
		_ = os.Remove(filepath.Join(binDir, ".pending", "kubernetes-1.32__kube-apiserver"))
	}()
	start := time.Now()
	if err := RequireBinaries(binDir, "kubernetes-1.32/kube-apiserver"); err != nil {
		t.Fatalf("want the binary once built, got %v", err)
	}
	<-built
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("returned after %s, before the binary was built", waited)
	}
}

// A failed or stopped background build is an error naming its log, not a
// wait until the deadline.
func TestRequireBinariesSaysWhenTheBackgroundBuildFailed(t *testing.T) {
	binDir, _ := pendingBuild(t, "kueue", true)
	if err := os.WriteFile(filepath.Join(binDir, ".pending", "failed"), []byte("kueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := RequireBinaries(binDir, "kueue")
	if err == nil || !strings.Contains(err.Error(), "the background build of kueue failed") || !strings.Contains(err.Error(), ".late-build.log") {
		t.Errorf("want the failed build named with its log, got %v", err)
	}

	stopped, _ := pendingBuild(t, "registry", false)
	err = RequireBinaries(stopped, "registry")
	if err == nil || !strings.Contains(err.Error(), "stopped before building it") {
		t.Errorf("want the stopped build named, got %v", err)
	}
}

// Without a background build, a missing binary says what to run.
func TestRequireBinariesNamesWhatToRun(t *testing.T) {
	err := RequireBinaries(t.TempDir(), "helm4")
	if err == nil || !strings.Contains(err.Error(), "run `make tools`") {
		t.Errorf("want `make tools` named, got %v", err)
	}
}
