// Package dashboards defines jobferry's Grafana dashboards in Go, the one
// source of the JSON files the manager chart ships (hack/dashboards writes
// them). Each dashboard has a datasource variable and a worker variable;
// every panel reads Prometheus with queries that use them.
package dashboards

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dashboard is the part of Grafana's dashboard model jobferry uses.
type Dashboard struct {
	UID, Title, Description string
	Panels                  []Panel
}

// Panel is one panel: a time series or a stat, with its queries.
type Panel struct {
	Title, Description string
	// Type is "timeseries" or "stat".
	Type string
	// Unit is a Grafana unit ("short", "s", "percentunit", "reqps").
	Unit    string
	Targets []Target
	// Width in grid columns (of 24); 12 when 0.
	Width int
}

// Target is one query of a panel.
type Target struct {
	Expr, Legend string
}

// Variables are the dashboard variables every query may use, with the value
// a check substitutes for each (Substitute).
var Variables = map[string]string{
	// worker: one or more WorkerCluster names; "All" is the regex .*
	"$worker": ".*",
	// Grafana's own range variable.
	"$__rate_interval": "5m",
}

// Substitute replaces the dashboard variables in expr with the values a
// check uses: every worker, a 5 minute rate window.
func Substitute(expr string) string {
	for v, value := range Variables {
		expr = strings.ReplaceAll(expr, v, value)
	}
	return expr
}

const datasource = "${datasource}"

// JSON is the dashboard as Grafana imports it.
func (d Dashboard) JSON() ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": datasource}
	panels := make([]any, 0, len(d.Panels))
	x, y, rowHeight := 0, 0, 8
	for i, p := range d.Panels {
		width := p.Width
		if width == 0 {
			width = 12
		}
		if x+width > 24 {
			x, y = 0, y+rowHeight
		}
		targets := make([]any, 0, len(p.Targets))
		for j, t := range p.Targets {
			targets = append(targets, map[string]any{
				"datasource": ds, "refId": string(rune('A' + j)), "expr": t.Expr, "legendFormat": t.Legend, "range": true,
			})
		}
		unit := p.Unit
		if unit == "" {
			unit = "short"
		}
		panel := map[string]any{
			"id": i + 1, "type": p.Type, "title": p.Title, "description": p.Description, "datasource": ds,
			"gridPos":     map[string]int{"h": rowHeight, "w": width, "x": x, "y": y},
			"targets":     targets,
			"fieldConfig": map[string]any{"defaults": map[string]any{"unit": unit}, "overrides": []any{}},
			"options":     map[string]any{},
		}
		if p.Type == "timeseries" {
			panel["options"] = map[string]any{"legend": map[string]any{"displayMode": "table", "placement": "bottom", "showLegend": true}}
		}
		panels = append(panels, panel)
		x += width
	}
	out := map[string]any{
		"uid": d.UID, "title": d.Title, "description": d.Description, "tags": []string{"jobferry"},
		"editable": true, "schemaVersion": 39, "refresh": "30s", "timezone": "browser",
		"time":   map[string]string{"from": "now-1h", "to": "now"},
		"panels": panels,
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": map[string]any{}, "hide": 0},
			map[string]any{
				"name": "worker", "label": "Worker cluster", "type": "query", "datasource": ds,
				"definition": "label_values(jobferry_workercluster_connected, worker)",
				"query":      map[string]any{"query": "label_values(jobferry_workercluster_connected, worker)", "refId": "worker"},
				"includeAll": true, "multi": true, "allValue": ".*", "refresh": 2, "sort": 1,
				"current": map[string]any{"text": "All", "value": "$__all"},
			},
		}},
	}
	raw, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return append(raw, '\n'), nil
}
