package workers

import (
	"context"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobferry/jobferry/manager/metrics"
)

// capacityCollector serves the pools of each connected worker's last
// capacity summary, at scrape time from the worker caches, on the leader
// only: a standby's connections (Standby) would serve the same series
// twice.
type capacityCollector struct {
	conns                               Lookup
	leads                               func() bool
	allocatable, requested, free, nodes *prometheus.Desc
}

// NewCapacityCollector serves the pools of each connected worker's last
// capacity summary (jobferry_workercluster_pool_*) while leads says this
// replica leads.
func NewCapacityCollector(conns Lookup, leads func() bool) prometheus.Collector {
	labels := []string{"worker", "pool", "resource"}
	return &capacityCollector{conns: conns, leads: leads,
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
	if !c.leads() {
		return
	}
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
