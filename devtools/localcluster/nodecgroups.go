package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A real node's processes live in cgroups of their own: its root (the
// kubelet's cgroupRoot, its pods below) and the daemons cgroup under it
// (containerd with its shims, the kubelet, kube-proxy), created in every
// cgroup v1 hierarchy. Tearing a node down kills every process in that
// tree, so nothing of it survives, even what its parents' death left
// behind, and then removes the cgroups.

// cgroupMount is where the host's cgroup hierarchies are mounted.
const cgroupMount = "/sys/fs/cgroup"

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (cpu, memory,
// name=systemd...). A cgroup v2 host is refused with what to do.
func cgroupHierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		return nil, errors.New("real nodes run on cgroup v1 hosts (the kubelet's cgroupfs driver in a cgroup of every v1 hierarchy, as on this project's machines); this host has cgroup v2, which they do not support yet")
	}
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(cgroupMount, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil && e.IsDir() {
			out = append(out, dir)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy mounted under %s", cgroupMount)
	}
	return out, nil
}

// makeCgroup creates path (such as /jobferry/0-worker-1/daemons) in every
// hierarchy; in cpuset's, each new level gets its parent's CPUs and memory
// nodes first, or no process could join it.
func makeCgroup(path string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		dir := h
		for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				value, err := os.ReadFile(filepath.Join(parent, f))
				if errors.Is(err, fs.ErrNotExist) {
					break // not the cpuset hierarchy
				}
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), value, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// joinCgroupScript is a shell fragment moving the shell into path in every
// hierarchy, for a launcher that then execs a node daemon (so the daemon
// and everything it starts are in the node's tree from its first
// instruction on).
func joinCgroupScript(path string) string {
	return fmt.Sprintf(`for d in %s/*%s; do echo $$ > "$d/cgroup.procs"; done`, cgroupMount, path)
}

// killCgroupTree kills every process in path's tree (in every hierarchy)
// until none is left, or fails after timeout.
func killCgroupTree(path string, timeout time.Duration) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		pids := map[int]bool{}
		for _, h := range hierarchies {
			if err := walkCgroups(filepath.Join(h, path), func(dir string) error {
				return readPIDs(filepath.Join(dir, "cgroup.procs"), pids)
			}); err != nil {
				return err
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes left in cgroup %s after SIGKILL", len(pids), path)
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is fine
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroupTree removes path's tree in every hierarchy, deepest first.
func removeCgroupTree(path string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hierarchies {
		var dirs []string
		if err := walkCgroups(filepath.Join(h, path), func(dir string) error {
			dirs = append(dirs, dir)
			return nil
		}); err != nil {
			errs = append(errs, err)
			continue
		}
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		// Its parents too (/jobferry), once no other node's is in them.
		for parent := filepath.Dir(path); parent != "/" && parent != "."; parent = filepath.Dir(parent) {
			if err := os.Remove(filepath.Join(h, parent)); err != nil {
				break // another node's cgroup is there, or it is gone
			}
		}
	}
	return errors.Join(errs...)
}

// walkCgroups calls f for root and every cgroup below it; a missing root is
// an empty tree.
func walkCgroups(root string, f func(dir string) error) error {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		return f(p)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func readPIDs(path string, into map[int]bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(s.Text())); err == nil {
			into[pid] = true
		}
	}
	return s.Err()
}

// unmountUnder lazily unmounts every mount point at or below dir, deepest
// first: a node's container root filesystems, its pods' volumes and network
// namespaces, its own network namespace.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
