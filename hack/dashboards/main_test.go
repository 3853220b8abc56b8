package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jobferry/jobferry/internal/dashboards"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/metrics"
)

const chartDir = "../../charts/jobferry-manager/dashboards"

// The chart's dashboards are what internal/dashboards defines, and nothing
// else is in their directory.
func TestChartDashboardsAreCurrent(t *testing.T) {
	var want []string
	for _, d := range dashboards.All() {
		raw, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		name := d.UID + ".json"
		want = append(want, name)
		got, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil || string(got) != string(raw) {
			t.Errorf("%s is stale or missing (%v): run `make generate` (go run ./hack/dashboards)", name, err)
		}
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(want, filepath.Base(f)) {
			t.Errorf("%s is not a dashboard of internal/dashboards", f)
		}
	}
}

var metricName = regexp.MustCompile(`\b(jobferry_[a-z_]+|workqueue_[a-z_]+|controller_runtime_[a-z_]+)\b`)

// Every metric a panel reads is one the binaries serve: jobferry's own from
// the metrics reference, the work queue's and controller-runtime's by name.
func TestDashboardsReadServedMetrics(t *testing.T) {
	reference, err := os.ReadFile("../../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{
		"workqueue_depth": true, "workqueue_queue_duration_seconds": true,
		"controller_runtime_reconcile_time_seconds": true, "controller_runtime_reconcile_errors_total": true,
	}
	for _, d := range dashboards.All() {
		if len(d.Panels) == 0 {
			t.Errorf("%s has no panels", d.UID)
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s / %s has no query", d.UID, p.Title)
			}
			for _, target := range p.Targets {
				for _, name := range metricName.FindAllString(target.Expr, -1) {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
					if strings.HasPrefix(base, "jobferry_") && !strings.Contains(string(reference), "| `"+base+"` |") || !strings.HasPrefix(base, "jobferry_") && !known[base] {
						t.Errorf("%s / %s reads %s, which no binary serves", d.UID, p.Title, name)
					}
				}
			}
		}
	}
}

// The Kueue panels read label values the manager serves: waiting reasons
// of its policy, and dispatch results of its metrics.
func TestKueuePanelsReadTheManagersLabels(t *testing.T) {
	for _, reason := range dashboards.KueueWaitingReasons {
		if !slices.Contains(policy.WaitingReasons(), reason) {
			t.Errorf("waiting reason %q is not one of the manager's %v", reason, policy.WaitingReasons())
		}
	}
	for _, result := range dashboards.KueueDispatchResults {
		if !slices.Contains(metrics.DispatchResults(), result) {
			t.Errorf("dispatch result %q is not one of the manager's %v", result, metrics.DispatchResults())
		}
	}
}
