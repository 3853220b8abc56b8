package manager

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/internal/jobstatus"
)

// Metrics of the manager, registered with controller-runtime's registry and
// served on its metrics endpoint. The names are fixed: dashboards use them.
var (
	dispatchTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_dispatch_total",
		Help: "Dispatch attempts by worker and result (created, conflict, error, lost: moved off a lost worker, deleted: its mirror was deleted on the worker, not_ours: a Job not jobferry's took its mirror's place, unschedulable: no worker fits, with an empty worker).",
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
	orphanScans = prometheus.NewCounterVec(prometheus.CounterOpts{
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
	placementRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_placement_rejections_total",
		Help: "Workers placement turned down for a Job, by worker and reason (" + strings.Join(dispatch.RejectionReasons, ", ") + ").",
	}, []string{"worker", "reason"})
	remoteRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_requests_total",
		Help: "Requests of the manager to a worker cluster's API server, by worker, verb (GET, WATCH, POST, PUT, PATCH, DELETE) and HTTP code (\"error\" when no answer came).",
	}, []string{"worker", "verb", "code"})
	credentialExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobferry_workercluster_credential_expiry_timestamp_seconds",
		Help: "When the token in a worker's kubeconfig Secret expires (Unix time); absent for credentials without expiry.",
	}, []string{"worker"})
	jobsWoken = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jobferry_waiting_jobs_woken_total",
		Help: "Manager Jobs that waited for room and were woken to be placed again, because a capacity or worker change made room for them.",
	})
	warningsForwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_warnings_forwarded_total",
		Help: "Warning Events of mirrors and their pods on a worker (FailedScheduling, evictions, failed starts, the mirror's own) recorded on their manager Jobs, by worker and the kind of object they were about (Pod, Job).",
	}, []string{"worker", "kind"})
	credentialRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobferry_workercluster_credential_renewals_total",
		Help: "Renewals of worker tokens by the manager, by worker and result (renewed, failed).",
	}, []string{"worker", "result"})
)

func init() {
	metrics.Registry.MustRegister(registered()...)
	// Jobs no worker fits are counted without a worker.
	dispatchTotal.WithLabelValues("", "unschedulable")
}

// registered are the metrics registered when the package loads; the Job
// and WorkerCluster controllers register the ones read from their caches.
func registered() []prometheus.Collector {
	return []prometheus.Collector{dispatchTotal, dispatchDuration, statusSyncTotal, statusSyncLag, statusWriteRejected,
		workerClusterConnected, workerConnectedDeprecated, placementRejections, remoteRequests, orphansDeleted, orphanScans,
		credentialExpiry, credentialRenewals, jobsWoken, warningsForwarded}
}

// Collectors are every metric of the manager, for the metrics reference
// (hack/metricsdoc); the ones read at scrape time are described without
// their sources.
func Collectors() []prometheus.Collector {
	return append(registered(), newJobsCollector(nil, nil), newCapacityCollector(nil))
}

// Results each worker's counters are labelled with.
var (
	dispatchResults   = []string{"created", "conflict", "error", "lost", "deleted", "not_ours"}
	statusSyncResults = []string{"written", "conflict", "rejected", "error"}
	warningKinds      = []string{"Pod", "Job"}
)

// initWorkerMetrics makes a registered worker's counters exist at 0 before
// anything happens there: a series that first appears at 4 has rate() and
// increase() count none of those 4, so the first burst of dispatches to a
// worker would be missing from the dashboards.
func initWorkerMetrics(worker string) {
	for _, result := range dispatchResults {
		dispatchTotal.WithLabelValues(worker, result)
	}
	for _, result := range statusSyncResults {
		statusSyncTotal.WithLabelValues(worker, result)
	}
	for _, reason := range dispatch.RejectionReasons {
		placementRejections.WithLabelValues(worker, reason)
	}
	for _, kind := range warningKinds {
		warningsForwarded.WithLabelValues(worker, kind)
	}
	orphansDeleted.WithLabelValues(worker)
	orphanScans.WithLabelValues(worker)
}

// forgetWorkerMetrics drops every series of a worker that is no longer
// registered.
func forgetWorkerMetrics(worker string) {
	deleteWorkerConnected(worker)
	for _, vec := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{dispatchTotal, statusSyncTotal, placementRejections, warningsForwarded, orphansDeleted, orphanScans, remoteRequests, credentialExpiry, credentialRenewals} {
		vec.DeletePartialMatch(prometheus.Labels{"worker": worker})
	}
}

// setWorkerConnected sets jobferry_workercluster_connected and its
// deprecated twin.
func setWorkerConnected(worker string, connected bool) {
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

func newJobsCollector(reader client.Reader, connected func(string) bool) *jobsCollector {
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

// capacityCollector serves the pools of each connected worker's last
// capacity summary, at scrape time from the worker caches.
type capacityCollector struct {
	conns                               connections
	allocatable, requested, free, nodes *prometheus.Desc
}

func newCapacityCollector(conns connections) *capacityCollector {
	labels := []string{"worker", "pool", "resource"}
	return &capacityCollector{conns: conns,
		allocatable: prometheus.NewDesc("jobferry_workercluster_pool_allocatable",
			"Allocatable resources of a worker's node pool (cpu in cores, memory and storage in bytes, pods and others in units), from its ClusterCapacity.", labels, nil),
		requested: prometheus.NewDesc("jobferry_workercluster_pool_requested",
			"Resources requested by the pods on a worker's node pool, terminating ones included, from its ClusterCapacity.", labels, nil),
		free: prometheus.NewDesc("jobferry_workercluster_pool_free",
			"Allocatable minus requested resources of a worker's node pool, from its ClusterCapacity.", labels, nil),
		nodes: prometheus.NewDesc("jobferry_workercluster_pool_nodes",
			"Schedulable, ready nodes of a worker's node pool.", []string{"worker", "pool"}, nil),
	}
}

func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.allocatable
	ch <- c.requested
	ch <- c.free
	ch <- c.nodes
}

func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	for _, worker := range c.conns.names() {
		conn := c.conns.conn(worker)
		if conn == nil || !conn.connected() {
			continue
		}
		summary := conn.capacity(context.Background())
		if summary == nil {
			continue
		}
		for _, p := range summary.Pools {
			ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(p.Nodes), worker, p.Name)
			for desc, list := range map[*prometheus.Desc]corev1.ResourceList{c.allocatable: p.Allocatable, c.requested: p.Requested, c.free: p.Free} {
				for name, q := range list {
					ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, q.AsApproximateFloat64(), worker, p.Name, string(name))
				}
			}
		}
	}
}

// countingTransport counts a worker client's requests by verb and code.
type countingTransport struct {
	worker string
	next   http.RoundTripper
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := req.Method
	if verb == http.MethodGet && req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	remoteRequests.WithLabelValues(t.worker, verb, code).Inc()
	return resp, err
}
