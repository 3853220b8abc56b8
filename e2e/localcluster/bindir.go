package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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

// checkBinaries fails with what to run when a binary is missing.
func checkBinaries(binDir string, names ...string) error {
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make tools` first", name, binDir)
		}
	}
	return nil
}
