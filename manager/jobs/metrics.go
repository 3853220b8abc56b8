package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// unregisteredWorker is the worker label of Jobs placed on a worker no
// WorkerCluster names (deleted since, or written by someone else).
const unregisteredWorker = "(unregistered)"

// jobsCollector serves jobferry_jobs{worker,phase} and
// jobferry_jobs_waiting{reason} from the manager's Job cache at scrape time,
// so the gauges can never drift from what is stored.
type jobsCollector struct {
	reader client.Reader
	// connected says whether a worker is connected now.
	connected func(worker string) bool
	jobs      *prometheus.Desc
	waiting   *prometheus.Desc
}

// NewJobsCollector serves jobferry_jobs and jobferry_jobs_waiting from
// reader (the manager's cache), connected saying which workers are.
func NewJobsCollector(reader client.Reader, connected func(string) bool) prometheus.Collector {
	return &jobsCollector{reader: reader, connected: connected,
		jobs: prometheus.NewDesc("jobferry_jobs",
			"Manager Jobs by worker (empty while unplaced, "+unregisteredWorker+" for a name no WorkerCluster has) and phase (Pending, Running, Succeeded, Failed).",
			[]string{"worker", "phase"}, nil),
		waiting: prometheus.NewDesc("jobferry_jobs_waiting",
			"Unfinished manager Jobs that do not run, by reason: "+strings.Join(waitingReasons, ", ")+".",
			[]string{"reason"}, nil),
	}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.jobs; ch <- c.waiting }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	var jobs batchv1.JobList
	if err := c.reader.List(context.Background(), &jobs, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("listing manager Jobs: %w", err))
		return
	}
	// The worker label takes only the names of registered workers: a Job's
	// annotation is not a bounded set of values.
	var workers v1alpha1.WorkerClusterList
	if err := c.reader.List(context.Background(), &workers); err != nil {
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
	for _, reason := range waitingReasons {
		waiting[reason] = 0
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !v1alpha1.IsManagerJob(job) {
			continue
		}
		worker := job.Annotations[v1alpha1.WorkerAnnotation]
		label := worker
		if worker != "" && !registered[worker] {
			label = unregisteredWorker
		}
		counts[key{label, jobstatus.Phase(job.Status)}]++
		if reason := jobWaiting(job, worker != "" && !c.connected(worker)); reason != "" {
			waiting[reason]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), k.worker, k.phase)
	}
	for reason, n := range waiting {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), reason)
	}
}
