package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// What real nodes change on the host outside their own directories, and
// how it is put back. A kubelet sets host-wide kernel parameters at start
// (kernelTunables) and creates a few fixed paths (hostPaths) whatever its
// configuration; several environments with real nodes may run at once (a
// test's and a developer's), so the host keeps one ledger of what was there
// before the first of them started, and the last one to stop puts it back.
// Everything else a node makes lives under its cluster's directory or in
// its network namespace.

// hostStateDir holds the ledger and the lock serialising changes to the
// host. On tmpfs: a reboot clears it together with what it records.
var hostStateDir = "/run/jobferry-nodes"

// kernelTunables are the host-wide parameters a kubelet sets when they
// differ (its setupKernelTunables with protectKernelDefaults false).
var kernelTunables = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
}

// hostPaths are fixed paths a node creates whatever its configuration (the
// kubelet's device-plugin socket directory, the CNI result cache, the
// container log symlinks, the runc shims' sockets, iptables' lock), and the
// directory of the nodes' own files.
var hostPaths = []string{
	"/var/lib/kubelet",
	"/var/lib/cni",
	"/var/log/containers",
	"/run/containerd",
	"/run/xtables.lock",
	nodesDir,
}

// hostLedger is what the host had before the first environment with real
// nodes started, and which environments are using it now.
type hostLedger struct {
	// Tunables are the values of kernelTunables before.
	Tunables map[string]string `json:"tunables"`
	// Absent are the hostPaths that did not exist before.
	Absent []string `json:"absent"`
	// Holders are the directories of the environments using real nodes.
	Holders []string `json:"holders"`
}

// withHostLock runs f while holding the host's lock (an flock on a file in
// hostStateDir, released by the kernel if this process dies).
func withHostLock(f func() error) error {
	if err := os.MkdirAll(hostStateDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(hostStateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too
	return f()
}

func ledgerPath() string { return filepath.Join(hostStateDir, "ledger.json") }

func readLedger() (*hostLedger, error) {
	data, err := os.ReadFile(ledgerPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l hostLedger
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ledgerPath(), err)
	}
	return &l, nil
}

// liveHolders drops the holders whose environment is gone (its directory
// or its network record removed: stopped, or its directory deleted after a
// crash).
func liveHolders(holders []string) []string {
	var out []string
	for _, h := range holders {
		if _, err := os.Stat(networkFile(h)); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// holdHost records envDir as using the host, and what the host has before
// any node changes it if envDir is the first.
func holdHost(envDir string) error {
	return withHostLock(func() error {
		l, err := readLedger()
		if err != nil {
			return err
		}
		if l == nil || len(liveHolders(l.Holders)) == 0 {
			if l != nil {
				// A crashed environment's changes were never put back:
				// its ledger still says what the host had before it.
				if err := restoreHost(l); err != nil {
					return err
				}
			}
			l = &hostLedger{Tunables: map[string]string{}}
			for _, name := range kernelTunables {
				value, err := readSysctl(name)
				if err != nil {
					return err
				}
				l.Tunables[name] = value
			}
			for _, p := range hostPaths {
				if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
					l.Absent = append(l.Absent, p)
				}
			}
		}
		l.Holders = append(liveHolders(l.Holders), envDir)
		return writeJSON(ledgerPath(), l)
	})
}

// releaseHost removes envDir from the holders and, when it was the last,
// puts back what the ledger says the host had.
func releaseHost(envDir string) error {
	return withHostLock(func() error { return releaseHostLocked(envDir) })
}

// releaseHostLocked is releaseHost for a caller holding the host's lock.
func releaseHostLocked(envDir string) error {
	l, err := readLedger()
	if err != nil || l == nil {
		return err
	}
	var rest []string
	for _, h := range liveHolders(l.Holders) {
		if h != envDir {
			rest = append(rest, h)
		}
	}
	if len(rest) > 0 {
		l.Holders = rest
		return writeJSON(ledgerPath(), l)
	}
	if err := restoreHost(l); err != nil {
		return err
	}
	return os.Remove(ledgerPath())
}

// restoreHost puts the tunables back and removes the fixed paths that did
// not exist before.
func restoreHost(l *hostLedger) error {
	var errs []error
	for name, value := range l.Tunables {
		if err := writeSysctl(name, value); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range l.Absent {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctl(name string) (string, error) {
	data, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return strings.TrimSpace(string(data)), nil
}

func writeSysctl(name, value string) error {
	if current, err := readSysctl(name); err == nil && current == value {
		return nil
	}
	if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("restoring %s to %s: %w", name, value, err)
	}
	return nil
}

// command runs a host tool (ip, nsenter, ctr) and returns its error with
// what it printed.
func command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// KernelTunables reads the host-wide parameters real nodes' kubelets set,
// for a test comparing them before and after.
func KernelTunables() (map[string]string, error) {
	out := map[string]string{}
	for _, name := range kernelTunables {
		value, err := readSysctl(name)
		if err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, nil
}

// HostLeftovers lists what an environment in envDir whose host network had
// index left on the host: processes running from or in envDir, mounts
// under it, cgroups, interfaces and routes of that index, its holding of
// the host ledger. Empty once it is torn down.
func HostLeftovers(envDir string, index int) ([]string, error) {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		if strings.Contains(string(cmdline), envDir+"/") {
			out = append(out, fmt.Sprintf("process %s: %s", filepath.Base(p), strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	nodeDirs, _ := filepath.Glob(filepath.Join(nodesDir, fmt.Sprintf("%d-*", index)))
	for _, d := range nodeDirs {
		out = append(out, "node directory "+d)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 {
			p := unescapeMountPath(fields[4])
			if strings.HasPrefix(p, envDir+"/") || strings.HasPrefix(p, filepath.Join(nodesDir, fmt.Sprintf("%d-", index))) {
				out = append(out, "mount "+fields[4])
			}
		}
	}
	cgroups, _ := filepath.Glob(fmt.Sprintf("%s/*/jobferry/%d-*", cgroupMount, index))
	for _, c := range cgroups {
		out = append(out, "cgroup "+c)
	}
	links, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if strings.HasPrefix(l.Name, fmt.Sprintf("jf%d", index)) {
			out = append(out, "interface "+l.Name)
		}
	}
	routes, err := exec.Command("ip", "-o", "route", "show").Output()
	if err != nil {
		return nil, err
	}
	for _, r := range strings.Split(strings.TrimSpace(string(routes)), "\n") {
		if strings.HasPrefix(r, fmt.Sprintf("10.%d.", 100+index)) || strings.HasPrefix(r, fmt.Sprintf("10.250.%d.", index)) {
			out = append(out, "route "+r)
		}
	}
	if l, err := readLedger(); err != nil {
		return nil, err
	} else if l != nil && slices.Contains(l.Holders, envDir) {
		out = append(out, "holder of the host ledger "+ledgerPath())
	}
	return out, nil
}

// HostLedgerHolders are the directories of the environments holding the
// host's ledger now (live ones only).
func HostLedgerHolders() ([]string, error) {
	l, err := readLedger()
	if err != nil || l == nil {
		return nil, err
	}
	return liveHolders(l.Holders), nil
}
