package jobcontroller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The usual series of the Job controller's counters exist at 0 before any
// Job finishes, so the first failure shows in increase() and rate().
func TestMetricsStartAtZero(t *testing.T) {
	initMetrics()
	if got := testutil.ToFloat64(jobsFinishedTotal.WithLabelValues("NonIndexed", "failed", "BackoffLimitExceeded")); got != 0 {
		t.Errorf("failed Jobs before any failed: %v", got)
	}
	// 2 completion modes × (2 success + 5 failure reasons).
	if n := testutil.CollectAndCount(jobsFinishedTotal); n < 14 {
		t.Errorf("%d jobs-finished series, want at least the 14 usual ones", n)
	}
	if n := testutil.CollectAndCount(terminatedPodsTrackingFinalizerTotal); n < 2 {
		t.Errorf("%d tracking-finalizer series, want add and delete", n)
	}
}
