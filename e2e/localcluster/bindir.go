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
// or bin/ at the repository root.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
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
