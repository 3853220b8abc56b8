package localcluster

import (
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// inotifyLimitFile holds the most inotify instances one user may have open.
const inotifyLimitFile = "/proc/sys/fs/inotify/max_user_instances"

// Inotify instances the components of a cluster open, counted in
// /proc/<pid>/fd (anon_inode:inotify): a kube-apiserver watches its
// certificate and CA files with six; a controller-manager, scheduler or
// KWOK with a few; whatever runs beside the clusters (the jobferry manager's
// certificate watchers, helm, the tests) with some more.
const (
	inotifyPerAPIServer = 6
	inotifyPerComponent = 2
	inotifyBeside       = 16
)

// inotifyInstances is how many inotify instances an environment's control
// planes open together.
func inotifyInstances(spec EnvironmentSpec) int {
	n := inotifyBeside + spec.FollowedLogs
	for _, s := range append([]Spec{spec.Manager}, spec.Workers...) {
		n += inotifyPerAPIServer
		if !s.APIServerOnly {
			n += inotifyPerComponent // kube-controller-manager
		}
		if len(s.Pools) > 0 {
			n += 2 * inotifyPerComponent // kube-scheduler and KWOK
		}
	}
	return n
}

// checkInotify refuses an environment whose components would run out of
// inotify instances (counting those this user has open already: the e2e
// tests' shared environment's, say): past the limit a component fails at
// start ("too many open files") far from the cause, or a followed log ends
// after its first lines. As root, where the limit may be written, it raises
// the limit instead (to the power of two above the need and those in use),
// says so on progress and leaves it raised (other environments may be using
// it), as `make test` installs what else its tests need.
func checkInotify(spec EnvironmentSpec, progress io.Writer) error {
	data, err := os.ReadFile(inotifyLimitFile)
	if err != nil {
		return fmt.Errorf("reading the inotify limit: %w", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("reading the inotify limit %s: %w", inotifyLimitFile, err)
	}
	need, inUse := inotifyInstances(spec), inotifyInUse()
	verdict := inotifyVerdict(need, inUse, limit, len(spec.Workers)+1)
	if verdict == nil || os.Geteuid() != 0 {
		return verdict
	}
	raised := roundUpPowerOfTwo(need + inUse)
	if err := os.WriteFile(inotifyLimitFile, []byte(strconv.Itoa(raised)), 0); err != nil {
		return fmt.Errorf("%w (raising it as root failed: %v)", verdict, err)
	}
	if progress != nil {
		fmt.Fprintf(progress, "raised fs.inotify.max_user_instances from %d to %d (left so): %d clusters and %d followed logs need about %d, %d are in use\n",
			limit, raised, len(spec.Workers)+1, spec.FollowedLogs, need, inUse)
	}
	return nil
}

// inotifyVerdict says whether need inotify instances fit under limit with
// inUse open already.
func inotifyVerdict(need, inUse, limit, clusters int) error {
	if need+inUse <= limit {
		return nil
	}
	return fmt.Errorf("%d clusters need about %d inotify instances (each API server watches its certificates, KWOK each followed log) and %d are in use, "+
		"more than fs.inotify.max_user_instances (%d) allows: raise it, e.g. sysctl -w fs.inotify.max_user_instances=%d",
		clusters, need, inUse, limit, roundUpPowerOfTwo(need+inUse))
}

// inotifyInUse counts the inotify instances this user's processes hold
// (their descriptors linking to anon_inode:inotify); a process that ends
// while counted is skipped.
func inotifyInUse() int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	uid := os.Geteuid()
	n := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		info, err := os.Stat(filepath.Join("/proc", p.Name()))
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && target == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n
}

func roundUpPowerOfTwo(n int) int { return 1 << bits.Len(uint(n-1)) }
