package localcluster

import (
	"fmt"
	"io"
	"math/bits"
	"os"
	"strconv"
	"strings"
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
// inotify instances: past the limit a component fails at start ("too many
// open files") far from the cause, or a followed log ends early. As root,
// where the limit may be written, it raises the limit instead (to the power
// of two above the need) and says so on progress, as `make test` installs
// what else its tests need.
func checkInotify(spec EnvironmentSpec, progress io.Writer) error {
	data, err := os.ReadFile(inotifyLimitFile)
	if err != nil {
		return fmt.Errorf("reading the inotify limit: %w", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("reading the inotify limit %s: %w", inotifyLimitFile, err)
	}
	need := inotifyInstances(spec)
	if need > limit && os.Geteuid() == 0 {
		raised := roundUpPowerOfTwo(need)
		if err := os.WriteFile(inotifyLimitFile, []byte(strconv.Itoa(raised)), 0); err == nil {
			if progress != nil {
				fmt.Fprintf(progress, "raised fs.inotify.max_user_instances from %d to %d: %d clusters and %d followed logs need about %d\n",
					limit, raised, len(spec.Workers)+1, spec.FollowedLogs, need)
			}
			return nil
		}
	}
	return inotifyVerdict(need, limit, len(spec.Workers)+1)
}

// inotifyVerdict says whether need inotify instances fit under limit.
func inotifyVerdict(need, limit, clusters int) error {
	if need <= limit {
		return nil
	}
	return fmt.Errorf("%d clusters need about %d inotify instances (each API server watches its certificates, KWOK each followed log), "+
		"more than fs.inotify.max_user_instances (%d) allows: raise it, e.g. sysctl -w fs.inotify.max_user_instances=%d",
		clusters, need, limit, roundUpPowerOfTwo(need))
}

func roundUpPowerOfTwo(n int) int { return 1 << bits.Len(uint(n-1)) }
