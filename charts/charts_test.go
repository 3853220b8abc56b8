// Package charts holds jobferry's helm charts; its tests check what can be
// checked without a cluster (the integration layer renders and applies them).
package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var charts = []string{"jobferry-manager", "jobferry-worker"}

// valueRow is a row of a chart README's values table: | `key` | default | what |
var valueRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// Every value in values.yaml is in the chart README's values table, and every
// row of the table is a value: a value documented as a whole (resources,
// nodeSelector) covers what is under it.
func TestREADMEValuesTableMatchesValues(t *testing.T) {
	for _, chart := range charts {
		t.Run(chart, func(t *testing.T) {
			readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			documented := map[string]bool{}
			for _, line := range strings.Split(string(readme), "\n") {
				if m := valueRow.FindStringSubmatch(line); m != nil {
					documented[m[1]] = true
				}
			}
			data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var values map[string]any
			if err := yaml.Unmarshal(data, &values); err != nil {
				t.Fatal(err)
			}
			var undocumented, seen []string
			walkValues(values, "", func(path string, leaf bool) bool {
				if documented[path] {
					seen = append(seen, path)
					return false
				}
				if leaf {
					undocumented = append(undocumented, path)
				}
				return true
			})
			if len(undocumented) > 0 {
				t.Errorf("values.yaml has values README.md's table does not document: %v", undocumented)
			}
			var unknown []string
			for key := range documented {
				if !slices.Contains(seen, key) {
					unknown = append(unknown, key)
				}
			}
			sort.Strings(unknown)
			if len(unknown) > 0 {
				t.Errorf("README.md's table documents values that values.yaml does not have: %v", unknown)
			}
		})
	}
}

// walkValues visits every key path of values (a.b.c), in order; visit says
// whether to go below a map.
func walkValues(values map[string]any, prefix string, visit func(path string, leaf bool) bool) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		sub, isMap := values[k].(map[string]any)
		if visit(path, !isMap || len(sub) == 0) && isMap {
			walkValues(sub, path, visit)
		}
	}
}

// The alerts a release may switch off (the schema's enum of
// metrics.prometheusRule.disabledAlerts) are the alerts files/alerts.yaml has,
// and each has a runbook_url into the troubleshooting page (whose sections
// docs/links_test.go checks).
func TestAlertSwitchesMatchTheAlerts(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("jobferry-manager", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if url := r.Annotations["runbook_url"]; !strings.HasPrefix(url, "https://github.com/jobferry/jobferry/blob/main/docs/tasks/troubleshooting.md#") {
				t.Errorf("alert %s: runbook_url %q, want a section of docs/tasks/troubleshooting.md", r.Alert, url)
			}
		}
	}
	var schema struct {
		Properties struct {
			Metrics struct {
				Properties struct {
					PrometheusRule struct {
						Properties struct {
							DisabledAlerts struct {
								Items struct{ Enum []string }
							}
						}
					}
				}
			}
		}
	}
	data, err = os.ReadFile(filepath.Join("jobferry-manager", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	enum := schema.Properties.Metrics.Properties.PrometheusRule.Properties.DisabledAlerts.Items.Enum
	if len(alerts) == 0 || !slices.Equal(slices.Sorted(slices.Values(enum)), slices.Sorted(slices.Values(alerts))) {
		t.Errorf("metrics.prometheusRule.disabledAlerts may name %v; files/alerts.yaml has %v", enum, alerts)
	}
}
