// Package memorylimit gives the Go runtime a soft memory limit below the
// container's: the heap of a controller that caches what it tracks grows
// with it, and at the default GOGC the runtime lets the heap reach twice
// what is live before it collects, so a manager whose live heap is half
// its container's limit is killed for memory it does not need. With a soft
// limit the runtime collects more often as it nears it instead. The charts
// pass the container's limit through the downward API (EnvVar); an
// operator's own GOMEMLIMIT wins.
package memorylimit

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// EnvVar holds the container's memory limit in bytes (the charts set it
// from the container's limits.memory).
const EnvVar = "JOBFERRY_MEMORY_LIMIT"

// DefaultRatio is the part of the container's limit the heap may use: the
// rest is for what the runtime does not count (stacks of threads,
// fragmentation, the binary).
const DefaultRatio = 0.9

// Decide is the soft limit to set, in bytes (0: leave the runtime's as it
// is), and why, from GOMEMLIMIT, the container's limit as EnvVar gives it
// and the part of it to use.
func Decide(goMemLimit, containerLimit string, ratio float64) (int64, string, error) {
	if ratio <= 0 || ratio > 1 || math.IsNaN(ratio) {
		return 0, "", fmt.Errorf("the part of the memory limit to use must be in (0, 1], not %v", ratio)
	}
	if goMemLimit != "" {
		return 0, "GOMEMLIMIT=" + goMemLimit + " is set", nil
	}
	if containerLimit == "" {
		return 0, EnvVar + " is not set: no container memory limit known", nil
	}
	limit, err := strconv.ParseInt(containerLimit, 10, 64)
	if err != nil || limit <= 0 {
		return 0, "", fmt.Errorf("%s=%q is not a memory limit in bytes", EnvVar, containerLimit)
	}
	soft := int64(float64(limit) * ratio)
	return soft, fmt.Sprintf("%.0f %% of the container's memory limit of %d bytes", ratio*100, limit), nil
}

// Apply sets the runtime's soft limit as Decide says from this process's
// environment, and says what it set (0: none) and why.
func Apply(ratio float64) (int64, string, error) {
	limit, why, err := Decide(os.Getenv("GOMEMLIMIT"), os.Getenv(EnvVar), ratio)
	if err != nil || limit == 0 {
		return 0, why, err
	}
	debug.SetMemoryLimit(limit)
	return limit, why, nil
}
