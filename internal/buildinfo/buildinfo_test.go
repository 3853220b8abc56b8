package buildinfo

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestCollectorIsOneWithTheBuildsLabels(t *testing.T) {
	ch := make(chan prometheus.Metric, 1)
	Collector("manager").Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 1 || labels["component"] != "manager" || labels["goversion"] != runtime.Version() ||
		labels["version"] == "" || labels["revision"] == "" {
		t.Errorf("value %v, labels %v", m.GetGauge().GetValue(), labels)
	}
}
