package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// With --worker-name, every series of jobferry's own metrics carries the
// worker's name; without it, none does.
func TestWorkerMetricsCarryTheWorkersName(t *testing.T) {
	for _, tc := range []struct{ name, metric, want string }{
		{"worker-7", "jobferry_test_named_total", "worker-7"},
		{"", "jobferry_test_unnamed_total", ""},
	} {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: tc.metric, Help: "a test counter"})
		workerMetrics(tc.name).MustRegister(c)
		c.Inc()
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range families {
			if f.GetName() != tc.metric {
				continue
			}
			found = true
			got := ""
			for _, l := range f.GetMetric()[0].GetLabel() {
				if l.GetName() == "worker" {
					got = l.GetValue()
				}
			}
			if got != tc.want {
				t.Errorf("%s: worker label %q, want %q", tc.metric, got, tc.want)
			}
		}
		if !found {
			t.Errorf("%s not registered", tc.metric)
		}
	}
}
