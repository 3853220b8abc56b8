package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKeepLogsMovesEachClustersLogs(t *testing.T) {
	clusters, dest := t.TempDir(), filepath.Join(t.TempDir(), "logs")
	for name, withLogs := range map[string]bool{"manager": true, "worker-1": true, "worker-2": false} {
		dir := filepath.Join(clusters, name)
		if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o755); err != nil {
			t.Fatal(err)
		}
		if withLogs {
			if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "logs", "kube-apiserver.log"), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The clusters' CA sits beside them.
	if err := os.WriteFile(filepath.Join(clusters, "ca.crt"), []byte("ca"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := keepLogs(clusters, dest); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manager", "worker-1"} {
		got, err := os.ReadFile(filepath.Join(dest, name, "kube-apiserver.log"))
		if err != nil || string(got) != name {
			t.Errorf("%s's log kept as %q, %v; want %q", name, got, err, name)
		}
	}
	if _, err := os.Stat(filepath.Join(dest, "worker-2")); !os.IsNotExist(err) {
		t.Errorf("worker-2 had no logs, yet %s/worker-2: %v", dest, err)
	}
}

func TestKeepLogsWithoutClustersSaysSo(t *testing.T) {
	if err := keepLogs(filepath.Join(t.TempDir(), "none"), t.TempDir()); err == nil {
		t.Error("keepLogs of a missing clusters directory returned nil")
	}
}
