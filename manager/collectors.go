package manager

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobferry/jobferry/manager/metrics"
)

// Collectors are every metric of the manager, for the metrics reference
// (hack/metricsdoc); the ones read at scrape time are described without
// their sources.
func Collectors() []prometheus.Collector {
	return append(metrics.Registered(), newJobsCollector(nil, nil), newCapacityCollector(nil))
}
