package metricsdoc

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestDescribeReadsNameTypeLabelsAndHelp(t *testing.T) {
	got, err := Describe([]prometheus.Collector{
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total", Help: `counts "quoted" | piped`}, []string{"worker", "code"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "a_info", Help: "info", ConstLabels: prometheus.Labels{"version": "1"}}),
		prometheus.NewHistogram(prometheus.HistogramOpts{Name: "c_seconds", Help: "time"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{
		{Name: "a_info", Type: "gauge", Help: "info", Labels: []string{"version"}},
		{Name: "b_total", Type: "counter", Help: `counts "quoted" | piped`, Labels: []string{"worker", "code"}},
		{Name: "c_seconds", Type: "histogram", Help: "time"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Type != want[i].Type || got[i].Help != want[i].Help || !slices.Equal(got[i].Labels, want[i].Labels) {
			t.Errorf("metric %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	doc, err := Markdown([]Section{{Title: "T", Intro: "I", Collectors: []prometheus.Collector{
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total", Help: `a | b`}, []string{"worker"})}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, "| `b_total` | counter | `worker` | a \\| b |") {
		t.Errorf("markdown row missing or unescaped:\n%s", doc)
	}
}
