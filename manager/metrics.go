package manager

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/mirror"
)

// Metrics of the manager, registered with controller-runtime's registry and
// served on its metrics endpoint. The names are fixed: dashboards use them.
var (
	dispatchTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_dispatch_total",
		Help: "Dispatch attempts by worker and result (created, conflict, error, unschedulable).",
	}, []string{"worker", "result"})
	dispatchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jobferry_dispatch_duration_seconds",
		Help:    "Time from the manager Job's creation to its mirror's creation on a worker.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
	statusSyncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_status_sync_total",
		Help: "Status copies from a mirror to its manager Job, by worker and result (written, rejected, conflict, error).",
	}, []string{"worker", "result"})
	statusSyncLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jobferry_status_sync_lag_seconds",
		Help:    "Time from observing a mirror's change on a worker to writing the manager Job's status.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
	statusWriteRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_status_write_rejected_total",
		Help: "Manager Job status writes the API server rejected, by the field its validation named.",
	}, []string{"rule"})
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_orphan_mirrors_deleted_total",
		Help: "Mirrors deleted by garbage collection because their manager Job no longer exists.",
	}, []string{"worker"})
	workerConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_worker_connected",
		Help: "1 while the worker is Connected, else 0.",
	}, []string{"worker"})
	credentialExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_workercluster_credential_expiry_timestamp_seconds",
		Help: "When the token in a worker's kubeconfig Secret expires (Unix time); absent for credentials without expiry.",
	}, []string{"worker"})
	jobsWoken = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jobferry_waiting_jobs_woken_total",
		Help: "Manager Jobs that waited for room and were woken to be placed again, because a capacity or worker change made room for them.",
	})
	credentialRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_credential_renewals_total",
		Help: "Renewals of worker tokens by the manager, by worker and result (renewed, failed).",
	}, []string{"worker", "result"})
)

func init() {
	metrics.Registry.MustRegister(dispatchTotal, dispatchDuration, statusSyncTotal, statusSyncLag, statusWriteRejected, workerConnected, orphansDeleted, credentialExpiry, credentialRenewals, jobsWoken)
}

// jobsCollector serves jobferry_jobs{worker,phase} from the manager's Job
// cache at scrape time, so the gauge can never drift from what is stored.
type jobsCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func newJobsCollector(reader client.Reader) *jobsCollector {
	return &jobsCollector{reader: reader, desc: prometheus.NewDesc("jobferry_jobs",
		"Manager Jobs by worker (empty while unplaced) and phase (Pending, Running, Succeeded, Failed).",
		[]string{"worker", "phase"}, nil)}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	var jobs batchv1.JobList
	if err := c.reader.List(context.Background(), &jobs, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	type key struct{ worker, phase string }
	counts := map[key]int{}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !isManagerJob(job) {
			continue
		}
		counts[key{job.Annotations[v1alpha1.WorkerAnnotation], mirror.Phase(job.Status)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.worker, k.phase)
	}
}
