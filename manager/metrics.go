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

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/metrics"
)

// Collectors are every metric of the manager, for the metrics reference
// (hack/metricsdoc); the ones read at scrape time are described without
// their sources.
func Collectors() []prometheus.Collector {
	return append(metrics.Registered(), newJobsCollector(nil, nil), newCapacityCollector(nil))
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
	conns                               workerPool
	allocatable, requested, free, nodes *prometheus.Desc
}

func newCapacityCollector(conns workerPool) *capacityCollector {
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
	for _, worker := range c.conns.Names() {
		conn := c.conns.Conn(worker)
		if conn == nil || !conn.Connected() {
			continue
		}
		summary := conn.Capacity(context.Background())
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
	metrics.RemoteRequests.WithLabelValues(t.worker, verb, code).Inc()
	return resp, err
}
