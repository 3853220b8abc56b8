package main

import (
	"os"
	"strings"
	"testing"

	"github.com/jobferry/jobferry/internal/metricsdoc"
)

// The metrics reference is what the code registers.
func TestMetricsReferenceIsCurrent(t *testing.T) {
	want, err := metricsdoc.Markdown(sections())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/reference/metrics.md is stale: run `make generate` (go run ./hack/metricsdoc)")
	}
	for _, name := range []string{"jobferry_workercluster_connected", "jobferry_build_info", "jobferry_jobs_waiting",
		"jobferry_workercluster_pool_free", "jobferry_placement_rejections_total", "jobferry_workercluster_requests_total",
		"jobferry_worker_job_syncs_total"} {
		if !strings.Contains(want, "| `"+name+"` |") {
			t.Errorf("the reference lists no %s", name)
		}
	}
}
