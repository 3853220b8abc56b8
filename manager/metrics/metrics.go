// Package metrics holds the manager's Prometheus metrics: every vector the
// controllers count into, registered with controller-runtime's registry when
// the package loads, and the per-worker series that start at zero when a
// WorkerCluster is registered and end with it. The collectors that read a
// cache at scrape time live with the cache they read (jobs, workers); their
// descriptions are here too, so one file names every metric. The names are
// fixed: dashboards use them.
package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/jobferry/jobferry/dispatch"
)

// Metrics of the manager, registered with controller-runtime's registry and
// served on its metrics endpoint. The names are fixed: dashboards use them.
var (
	DispatchTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_dispatch_total",
		Help: "Dispatch attempts by worker and result (" + describeResults() + ").",
	}, []string{"worker", "result"})
	DispatchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "jobferry_dispatch_duration_seconds",
		Help: "Time from the manager Job's creation to its mirror's creation on a worker (first attempts of Jobs Kueue does not queue: a queued Job's wait is Kueue's).",
		// 10 ms to 87 min: the waits for room the bench measures run to
		// tens of minutes at scale (16 buckets stopped at 327 s).
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
	})
	StatusSyncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_status_sync_total",
		Help: "Status copies from a mirror to its manager Job, by worker and result (written, rejected, conflict, error).",
	}, []string{"worker", "result"})
	StatusSyncLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jobferry_status_sync_lag_seconds",
		Help:    "Time from observing a mirror's change on a worker to writing the manager Job's status.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
	StatusWriteRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_status_write_rejected_total",
		Help: "Manager Job status writes the API server rejected, by the field its validation named.",
	}, []string{"rule"})
	OrphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_orphan_mirrors_deleted_total",
		Help: "Mirrors deleted by garbage collection because their manager Job no longer exists.",
	}, []string{"worker"})
	NamespacesDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_worker_namespaces_deleted_total",
		Help: "Namespaces the manager created on a worker and deleted again: the manager's namespace of that name was gone and no Job was left in it.",
	}, []string{"worker"})
	OrphanScans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_orphan_scans_total",
		Help: "Scans of a connected worker's mirrors for those whose manager Job no longer exists (at start, every --gc-interval and on every reconnect).",
	}, []string{"worker"})
	workerClusterConnected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_workercluster_connected",
		Help: "1 while the worker cluster is Connected, else 0.",
	}, []string{"worker"})
	// The worker binary owns the jobferry_worker_ prefix; this name stays
	// for one release, with the same value.
	workerConnectedDeprecated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_worker_connected",
		Help: "Deprecated: use jobferry_workercluster_connected, which has the same value; removed in the next release.",
	}, []string{"worker"})
	PlacementRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_placement_rejections_total",
		Help: "Workers placement turned down for a Job, by worker and reason (" + strings.Join(dispatch.RejectionReasons, ", ") + ").",
	}, []string{"worker", "reason"})
	RemoteRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_requests_total",
		Help: "Requests of the manager to a worker cluster's API server, by worker, verb (GET, WATCH, POST, PUT, PATCH, DELETE) and HTTP code (\"error\" when no answer came).",
	}, []string{"worker", "verb", "code"})
	CredentialExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_workercluster_credential_expiry_timestamp_seconds",
		Help: "When the token in a worker's kubeconfig Secret expires (Unix time); absent for credentials without expiry.",
	}, []string{"worker"})
	JobsWoken = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jobferry_waiting_jobs_woken_total",
		Help: "Manager Jobs that waited for room and were woken to be placed again, because a capacity or worker change made room for them.",
	})
	WarningsForwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_warnings_forwarded_total",
		Help: "Warning Events of mirrors and their pods on a worker (FailedScheduling, evictions, failed starts, the mirror's own) recorded on their manager Jobs, by worker and the kind of object they were about (Pod, Job).",
	}, []string{"worker", "kind"})
	CredentialRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_credential_renewals_total",
		Help: "Renewals of worker tokens by the manager, by worker and result (renewed, failed).",
	}, []string{"worker", "result"})
	InspectionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_inspection_requests_total",
		Help: "Requests to the inspection API (kubectl jobferry describe, logs and explain), by resource (jobs, jobs/log, jobs/placement, placements) and the HTTP code of the answer (403: the caller may not get the Job; 429: over the caller's limits).",
	}, []string{"resource", "code"})
	InspectionLogStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "jobferry_inspection_log_streams",
		Help: "Worker log streams the inspection API has open (a followed log of every pod of a Job takes one per pod and container).",
	})
)

func init() {
	crmetrics.Registry.MustRegister(registered()...)
	for _, result := range resultNames(workerlessResults) {
		DispatchTotal.WithLabelValues("", result)
	}
}

// registered are the metrics registered when the package loads; the Job
// and WorkerCluster controllers register the ones read from their caches.
func registered() []prometheus.Collector {
	return []prometheus.Collector{DispatchTotal, DispatchDuration, StatusSyncTotal, StatusSyncLag, StatusWriteRejected,
		workerClusterConnected, workerConnectedDeprecated, PlacementRejections, RemoteRequests, OrphansDeleted, NamespacesDeleted, OrphanScans,
		CredentialExpiry, CredentialRenewals, JobsWoken, WarningsForwarded, InspectionRequests, InspectionLogStreams}
}

// Registered are the metrics registered when the package loads, for the
// metrics reference (manager.Collectors adds those read at scrape time).
func Registered() []prometheus.Collector { return registered() }

// dispatchResult is a result label value of jobferry_dispatch_total and
// what it counts, for its help text.
type dispatchResult struct{ name, meaning string }

// The results of jobferry_dispatch_total: each worker's (made at 0 when
// the worker registers), and those counted without a worker.
var (
	perWorkerResults = []dispatchResult{{"created", ""}, {"conflict", ""}, {"error", ""},
		{"lost", "moved off a lost worker"}, {"deleted", "its mirror was deleted on the worker"},
		{"not_ours", "a Job not jobferry's took its mirror's place"}, {"requeued", "Kueue took the quota back and the placement went"}}
	workerlessResults = []dispatchResult{{"unschedulable", "no worker fits"},
		{"rejected", "jobferry's check on a Kueue-queued Job's Workload Rejected: no worker could ever run it, or its namespace refuses its pods"}}
)

// describeResults lists the results with their meanings, the workerless
// ones said to have an empty worker.
func describeResults() string {
	var parts []string
	for _, r := range slices.Concat(perWorkerResults, workerlessResults) {
		part := r.name
		if r.meaning != "" {
			part += ": " + r.meaning
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ") + "; " + strings.Join(resultNames(workerlessResults), " and ") + " with an empty worker"
}

func resultNames(results []dispatchResult) []string {
	var names []string
	for _, r := range results {
		names = append(names, r.name)
	}
	return names
}

// DispatchResults are the result label values of jobferry_dispatch_total:
// each worker's, and those counted without a worker (a copy).
func DispatchResults() []string {
	return append(resultNames(perWorkerResults), resultNames(workerlessResults)...)
}

// Results each worker's counters are labelled with.
var (
	dispatchResults   = resultNames(perWorkerResults)
	statusSyncResults = []string{"written", "conflict", "rejected", "error"}
	warningKinds      = []string{"Pod", "Job"}
)

// InitWorker makes a registered worker's counters exist at 0 before
// anything happens there: a series that first appears at 4 has rate() and
// increase() count none of those 4, so the first burst of dispatches to a
// worker would be missing from the dashboards.
func InitWorker(worker string) {
	for _, result := range dispatchResults {
		DispatchTotal.WithLabelValues(worker, result)
	}
	for _, result := range statusSyncResults {
		StatusSyncTotal.WithLabelValues(worker, result)
	}
	for _, reason := range dispatch.RejectionReasons {
		PlacementRejections.WithLabelValues(worker, reason)
	}
	for _, kind := range warningKinds {
		WarningsForwarded.WithLabelValues(worker, kind)
	}
	OrphansDeleted.WithLabelValues(worker)
	OrphanScans.WithLabelValues(worker)
}

// ForgetWorker drops every series of a worker that is no longer
// registered.
func ForgetWorker(worker string) {
	deleteWorkerConnected(worker)
	for _, vec := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{DispatchTotal, StatusSyncTotal, PlacementRejections, WarningsForwarded, OrphansDeleted, OrphanScans, RemoteRequests, CredentialExpiry, CredentialRenewals} {
		vec.DeletePartialMatch(prometheus.Labels{"worker": worker})
	}
}

// SetWorkerConnected sets jobferry_workercluster_connected and its
// deprecated twin.
func SetWorkerConnected(worker string, connected bool) {
	v := 0.0
	if connected {
		v = 1
	}
	workerClusterConnected.WithLabelValues(worker).Set(v)
	workerConnectedDeprecated.WithLabelValues(worker).Set(v)
}

// deleteWorkerConnected drops the worker's connection gauges.
func deleteWorkerConnected(worker string) {
	workerClusterConnected.DeleteLabelValues(worker)
	workerConnectedDeprecated.DeleteLabelValues(worker)
}
