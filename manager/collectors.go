package manager

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobferry/jobferry/manager/jobs"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
)

// Collectors are every metric of the manager, for the metrics reference
// (hack/metricsdoc): the vectors of package metrics, and the collectors
// that read a cache at scrape time, described without their sources.
func Collectors() []prometheus.Collector {
	return append(metrics.Registered(), jobs.NewJobsCollector(nil, nil, nil, nil), workers.NewCapacityCollector(nil, nil))
}
