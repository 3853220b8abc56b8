package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = "JOBFERRY_BIN_DIR"

const moduleLine = "module github.com/jobferry/jobferry\n"

// RepoRoot finds the jobferry repository containing the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte(moduleLine)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the jobferry repository (no go.mod of github.com/jobferry/jobferry above the working directory)")
		}
		dir = parent
	}
}

// BinDir returns the directory holding the pinned binaries: $JOBFERRY_BIN_DIR,
// the directory of the running program when the binaries are next to it (as
// `make build` puts bin/jobferry-dev among them, so it works from any directory),
// or bin/ at the root of the repository around the working directory.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	if exe, err := os.Executable(); err == nil {
		if dir := filepath.Dir(exe); hasBinaries(dir) {
			return dir, nil
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("finding the binaries: none next to this program, %v; set %s to the directory holding kube-apiserver, etcd and the jobferry binaries (bin/ of a checkout after `make tools build`)", err, BinDirEnv)
	}
	return filepath.Join(root, "bin"), nil
}

// hasBinaries reports whether dir holds the control plane binaries.
func hasBinaries(dir string) bool {
	return checkBinaries(dir, "etcd", "kube-apiserver", "kube-controller-manager") == nil
}

// RequireBinaries fails with what to run when one of the binaries is
// missing from binDir, after waiting for those the background build has yet
// to build.
func RequireBinaries(binDir string, names ...string) error { return checkBinaries(binDir, names...) }

// checkBinaries fails with what to run when a binary is missing, after
// waiting for any of them the background build of `make test-e2e` has yet
// to build (hack/tools/build-late.sh).
func checkBinaries(binDir string, names ...string) error {
	for _, name := range names {
		if err := awaitBackgroundBuild(binDir, name, 45*time.Minute); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make tools` first", name, binDir)
		}
	}
	return nil
}

// awaitBackgroundBuild returns once hack/tools/build-late.sh no longer has
// name to build (its marker in binDir/.pending is gone), or fails when that
// build failed, stopped, or is not done within timeout.
func awaitBackgroundBuild(binDir, name string, timeout time.Duration) error {
	pending := filepath.Join(binDir, ".pending")
	marker := filepath.Join(pending, strings.ReplaceAll(name, "/", "__"))
	log := filepath.Join(binDir, ".late-build.log")
	deadline := time.Now().Add(timeout)
	said := false
	for {
		if _, err := os.Stat(marker); err != nil {
			return nil
		}
		if failed, err := os.ReadFile(filepath.Join(pending, "failed")); err == nil {
			return fmt.Errorf("%s: the background build of %s failed; its output is in %s", name, strings.TrimSpace(string(failed)), log)
		}
		// The pid file appears a moment after the markers.
		if pid, err := os.ReadFile(filepath.Join(pending, "pid")); err == nil && !processAlive(strings.TrimSpace(string(pid))) {
			if _, err := os.Stat(marker); err == nil {
				return fmt.Errorf("%s: the background build stopped before building it (see %s); run `make tools`", name, log)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not built by the background build within %s (see %s)", name, timeout, log)
		}
		if !said {
			fmt.Fprintf(os.Stderr, "waiting for the background build of %s (%s)\n", name, log)
			said = true
		}
		time.Sleep(time.Second)
	}
}

// processAlive says whether the process of that PID exists.
func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return syscall.Kill(n, 0) == nil
}
