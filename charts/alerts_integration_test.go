//go:build integration

package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/jobferry/jobferry/internal/dashboards"
)

const (
	alertRules = "jobferry-manager/files/alerts.yaml"
	alertTests = "testdata/alerts_test.yaml"
)

// The alerting rules the manager chart ships pass `promtool check rules`,
// their `promtool test rules` cases pass, every alert of the file fires in at
// least one case (so no rule goes untested), and the chart's PrometheusRule
// carries exactly the file's groups.
func TestIntegrationAlertRules(t *testing.T) {
	if out, err := run(t, nil, "promtool", "check", "rules", alertRules); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := run(t, nil, "promtool", "test", "rules", alertTests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, alertRules, &rules)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, alertTests, &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	if len(alerts) != 6 {
		t.Errorf("alerts %v, want the 6 the chart documents", alerts)
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("no case of %s expects %s to fire", alertTests, a)
		}
	}

	out, err := render(t, "jobferry-manager", "", "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	var rule map[string]any
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "kind: PrometheusRule") {
			if err := yaml.Unmarshal([]byte(doc), &rule); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rule == nil {
		t.Fatalf("metrics.prometheusRule.enabled rendered no PrometheusRule:\n%s", out)
	}
	var file map[string]any
	readYAML(t, alertRules, &file)
	spec, _ := rule["spec"].(map[string]any)
	if got, want := yamlString(t, spec["groups"]), yamlString(t, file["groups"]); got != want {
		t.Errorf("the PrometheusRule's groups differ from %s:\n%s\nwant\n%s", alertRules, got, want)
	}
	labels := rule["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v, want release=prometheus from metrics.prometheusRule.labels", labels)
	}
	defaults, err := render(t, "jobferry-manager", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(defaults, "kind: PrometheusRule") {
		t.Error("the default values render a PrometheusRule; it is opt-in")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func yamlString(t *testing.T, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// Every query of every dashboard the chart ships, with its variables
// substituted, parses with Prometheus's PromQL parser (promtool's, through a
// recording rule per query).
func TestIntegrationDashboardQueriesParse(t *testing.T) {
	dir := t.TempDir()
	n := 0
	for _, d := range dashboards.All() {
		for _, p := range d.Panels {
			for i, target := range p.Targets {
				n++
				rules := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": []any{
					map[string]any{"record": "dashboard:query", "expr": dashboards.Substitute(target.Expr)},
				}}}}
				raw, err := yaml.Marshal(rules)
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(dir, fmt.Sprintf("q%d.yaml", n))
				if err := os.WriteFile(file, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := run(t, nil, "promtool", "check", "rules", file); err != nil {
					t.Errorf("dashboard %q, panel %q, query %d does not parse: %v\n%s\n%s", d.Title, p.Title, i+1, err, target.Expr, out)
				}
			}
		}
	}
	t.Logf("%d queries of %d dashboards parse", n, len(dashboards.All()))
}
