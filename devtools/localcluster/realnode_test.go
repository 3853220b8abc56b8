package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNodeImageArchive(t *testing.T) {
	for ref, want := range map[string]string{
		PauseImage:   "pause.oci.tar",
		BusyboxImage: "busybox.oci.tar",
		"ghcr.io/jobferry/jobferry-manager:0.1.0": "jobferry-manager.oci.tar",
	} {
		if got := NodeImageArchive(ref); got != want {
			t.Errorf("NodeImageArchive(%q) = %q, want %q", ref, got, want)
		}
	}
}

// The addresses of one environment's network never meet another index's,
// the Service range (10.96.0.0/16) or each other.
func TestHostNetworkAddresses(t *testing.T) {
	n := HostNetwork{Index: 3, Bridge: "jf3br"}
	for _, c := range []struct{ got, want string }{
		{n.HostIP(), "10.250.3.1"},
		{n.nodeIP(0), "10.250.3.10"},
		{n.nodeIP(2), "10.250.3.12"},
		{n.podCIDR(2), "10.103.2.0/24"},
		{n.podGateway(2), "10.103.2.1"},
		{HostNetwork{Index: maxHostNetworks - 1}.podCIDR(0), "10.163.0.0/24"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/jobferry-nodes/0-worker-1/netns`: "/var/lib/jobferry-nodes/0-worker-1/netns",
		`/tmp/a\040b`:   "/tmp/a b",
		`/tmp/tab\011x`: "/tmp/tab\tx",
		`/tmp/end\04`:   `/tmp/end\04`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// The host ledger: the first environment records what the host had, a
// second one shares it, and only the last to leave removes the fixed paths
// that were not there before; a crashed holder (its network record gone)
// does not keep the host held.
func TestHostLedgerLastOneOutPutsTheHostBack(t *testing.T) {
	root := t.TempDir()
	oldState, oldPaths, oldTunables := hostStateDir, hostPaths, kernelTunables
	t.Cleanup(func() { hostStateDir, hostPaths, kernelTunables = oldState, oldPaths, oldTunables })
	hostStateDir = filepath.Join(root, "state")
	existing, created := filepath.Join(root, "existing"), filepath.Join(root, "created")
	hostPaths = []string{existing, created}
	kernelTunables = nil
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(name string) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(networkFile(dir), []byte(`{"index":0}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b, crashed := env("a"), env("b"), env("crashed")

	for _, dir := range []string{crashed, a} {
		if err := holdHost(dir); err != nil {
			t.Fatal(err)
		}
	}
	// A node creates the fixed path after the first hold.
	if err := os.Mkdir(created, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := holdHost(b); err != nil {
		t.Fatal(err)
	}
	// The crashed environment's directory is deleted without a release.
	if err := os.RemoveAll(crashed); err != nil {
		t.Fatal(err)
	}
	release := func(dir string) {
		t.Helper()
		if err := os.Remove(networkFile(dir)); err != nil {
			t.Fatal(err)
		}
		if err := releaseHost(dir); err != nil {
			t.Fatal(err)
		}
	}
	release(a)
	if _, err := os.Stat(created); err != nil {
		t.Fatalf("%s removed while b still holds the host: %v", created, err)
	}
	release(b)
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("%s, absent before the first node, still exists after the last left: %v", created, err)
	}
	if _, err := os.Stat(existing); err != nil {
		t.Errorf("%s, there before, was removed: %v", existing, err)
	}
	if _, err := os.Stat(ledgerPath()); !os.IsNotExist(err) {
		t.Errorf("the ledger outlived its last holder: %v", err)
	}
}
