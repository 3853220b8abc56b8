package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/jobferry/jobferry/dispatch"
)

// A registered worker's counters exist at 0 before its first dispatch, so
// rate() counts that dispatch; deregistered, every series of it goes.
func TestWorkerMetricsStartAtZeroAndEndWithTheWorker(t *testing.T) {
	count := func(vec prometheus.Collector, worker string) int {
		ch := make(chan prometheus.Metric, 1000)
		vec.Collect(ch)
		close(ch)
		n := 0
		for m := range ch {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				t.Fatal(err)
			}
			for _, l := range out.Label {
				if l.GetName() == "worker" && l.GetValue() == worker {
					n++
				}
			}
		}
		return n
	}
	InitWorker("zero-test")
	if got := testutil.ToFloat64(DispatchTotal.WithLabelValues("zero-test", "created")); got != 0 {
		t.Errorf("created dispatches of a new worker: %v, want 0", got)
	}
	if n := count(DispatchTotal, "zero-test"); n != len(dispatchResults) {
		t.Errorf("%d dispatch series for a new worker, want %d", n, len(dispatchResults))
	}
	if n := count(PlacementRejections, "zero-test"); n != len(dispatch.RejectionReasons) {
		t.Errorf("%d placement rejection series for a new worker, want %d", n, len(dispatch.RejectionReasons))
	}
	RemoteRequests.WithLabelValues("zero-test", "GET", "200").Inc()
	SetWorkerConnected("zero-test", true)
	ForgetWorker("zero-test")
	for name, vec := range map[string]prometheus.Collector{"dispatch": DispatchTotal, "status": StatusSyncTotal, "rejections": PlacementRejections,
		"warnings": WarningsForwarded, "orphans": OrphansDeleted, "requests": RemoteRequests, "connected": workerClusterConnected} {
		if n := count(vec, "zero-test"); n != 0 {
			t.Errorf("%s: %d series left of a deregistered worker", name, n)
		}
	}
}
