package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is the user plus system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
	}
	// "pid (comm) state ppid ..." — comm may hold spaces; fields count from
	// after its closing parenthesis, where state is field 3.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	u, err := strconv.ParseFloat(fields[utime], 64)
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseFloat(fields[stime], 64)
	if err != nil {
		return 0, err
	}
	return (u + s) / clockTicks, nil
}

// rssBytes is a process's resident set size now. A process that has exited
// but is not yet reaped (a zombie: a failover run's killed leader) has no
// memory and no VmRSS line: that is an fs.ErrNotExist, as for one gone.
func rssBytes(pid int) (int64, error) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of pid %d: %w", pid, err)
	}
	rss, err := rssFromStatus(string(status))
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return rss, nil
}

// rssFromStatus is the VmRSS of a /proc/<pid>/status, in bytes.
func rssFromStatus(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in its status (the process has exited): %w", fs.ErrNotExist)
}

// processCPU reads the CPU time of every process of the clusters, keyed
// "cluster/process".
func processCPU(clusters []*localcluster.Cluster) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range clusters {
		for _, p := range c.Processes {
			s, err := cpuSeconds(p.PID)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", c.Name, p.Name, err)
			}
			out[c.Name+"/"+p.Name] = s
		}
	}
	return out, nil
}

// apiCounts are counters of every cluster's API server, keyed by cluster
// name: its writes by resource (writeCounts) and its admission webhooks'
// calls (webhookCalls).
type apiCounts struct {
	writes, webhooks map[string]map[string]float64
}

// clusterCounts reads apiCounts from every cluster's API server.
func clusterCounts(ctx context.Context, clusters []*localcluster.Cluster) (apiCounts, error) {
	out := apiCounts{writes: map[string]map[string]float64{}, webhooks: map[string]map[string]float64{}}
	for _, c := range clusters {
		client, err := kubernetes.NewForConfig(c.RESTConfig())
		if err != nil {
			return out, err
		}
		raw, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return out, fmt.Errorf("reading the metrics of %s's API server: %w", c.Name, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			return out, fmt.Errorf("parsing the metrics of %s's API server: %w", c.Name, err)
		}
		out.writes[c.Name] = writeCounts(families)
		out.webhooks[c.Name] = webhookCalls(families)
	}
	return out, nil
}

// rssSampler follows the resident set size of the processes pids names
// (the manager's replicas, which a failover run kills and restarts) until
// stopped and keeps the largest: VmHWM would hold the peak of the whole
// process life, earlier arms included.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	peak int64
	err  error
}

func sampleRSS(pids func() []int, every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for _, pid := range pids() {
				rss, err := rssBytes(pid)
				if errors.Is(err, fs.ErrNotExist) {
					continue // killed since pids was read
				}
				s.mu.Lock()
				if err != nil && s.err == nil {
					s.err = err
				}
				s.peak = max(s.peak, rss)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peak.
func (s *rssSampler) finish() (int64, error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.err
}
