package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// unregisteredWorker is the worker label of Jobs placed on a worker no
// WorkerCluster names (deleted since, or written by someone else).
const unregisteredWorker = "(unregistered)"

// jobsCollector serves jobferry_jobs{worker,phase} and
// jobferry_jobs_waiting{reason} from the counts of the manager's cached Jobs
// (jobsTally, kept from the cache's events), naming the registered workers
// and the connected ones at scrape time.
type jobsCollector struct {
	tally *jobsTally
	// synced: the tally has counted the cache's first list; until then no
	// count is served (a partial one would look like Jobs gone).
	synced func() bool
	// reader lists the WorkerClusters.
	reader client.Reader
	// connected says whether a worker is connected now.
	connected func(worker string) bool
	jobs      *prometheus.Desc
	waiting   *prometheus.Desc
}

// NewJobsCollector serves jobferry_jobs and jobferry_jobs_waiting from tally
// once synced, reader (the manager's cache) naming the registered workers
// and connected saying which workers are.
func NewJobsCollector(tally *jobsTally, synced func() bool, reader client.Reader, connected func(string) bool) prometheus.Collector {
	return &jobsCollector{tally: tally, synced: synced, reader: reader, connected: connected,
		jobs: prometheus.NewDesc("jobferry_jobs",
			"Manager Jobs by worker (empty while unplaced, "+unregisteredWorker+" for a name no WorkerCluster has) and phase (Pending, Running, Succeeded, Failed).",
			[]string{"worker", "phase"}, nil),
		waiting: prometheus.NewDesc("jobferry_jobs_waiting",
			"Unfinished manager Jobs that do not run, by reason: "+strings.Join(policy.WaitingReasons(), ", ")+".",
			[]string{"reason"}, nil),
	}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.jobs; ch <- c.waiting }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.synced() {
		// Absent, not wrong, until the cache's Jobs are counted; an invalid
		// metric would fail the whole scrape.
		return
	}
	// The worker label takes only the names of registered workers: a Job's
	// annotation is not a bounded set of values.
	var workers v1alpha1.WorkerClusterList
	if err := c.reader.List(context.Background(), &workers, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("listing WorkerClusters: %w", err))
		return
	}
	registered := map[string]bool{}
	for _, wc := range workers.Items {
		registered[wc.Name] = true
	}
	type key struct{ worker, phase string }
	counts := map[key]int{}
	waiting := map[string]int{}
	for _, reason := range policy.WaitingReasons() {
		waiting[reason] = 0
	}
	for k, n := range c.tally.Snapshot() {
		label := k.worker
		if k.worker != "" && !registered[k.worker] {
			label = unregisteredWorker
		}
		counts[key{label, k.phase}] += n
		reason := k.waiting
		if k.unfinished && k.worker != "" && !c.connected(k.worker) {
			// As JobWaiting says of a Job whose worker is down.
			reason = policy.WaitingWorkerLost
		}
		if reason != "" {
			waiting[reason] += n
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), k.worker, k.phase)
	}
	for reason, n := range waiting {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), reason)
	}
}
