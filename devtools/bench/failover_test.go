package bench

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func families(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	f, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Two replicas' scrapes add up series by series: what queueFigures reads of
// the sum is what both did.
func TestAddFamiliesSumsCountersAndHistogramsBySeries(t *testing.T) {
	leader := families(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="job",result="success"} 10
controller_runtime_reconcile_total{controller="workercluster",result="success"} 4
# TYPE jobferry_status_sync_lag_seconds histogram
jobferry_status_sync_lag_seconds_bucket{le="0.1"} 2
jobferry_status_sync_lag_seconds_bucket{le="1"} 5
jobferry_status_sync_lag_seconds_bucket{le="+Inf"} 6
jobferry_status_sync_lag_seconds_sum 3.5
jobferry_status_sync_lag_seconds_count 6
`)
	standby := families(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="job",result="success"} 7
controller_runtime_reconcile_total{controller="job",result="error"} 1
# TYPE jobferry_status_sync_lag_seconds histogram
jobferry_status_sync_lag_seconds_bucket{le="0.1"} 1
jobferry_status_sync_lag_seconds_bucket{le="1"} 1
jobferry_status_sync_lag_seconds_bucket{le="+Inf"} 3
jobferry_status_sync_lag_seconds_sum 20
jobferry_status_sync_lag_seconds_count 3
# TYPE leader_election_master_status gauge
leader_election_master_status{name="jobferry-manager"} 1
`)
	sum := map[string]*dto.MetricFamily{}
	addFamilies(sum, leader)
	addFamilies(sum, standby)
	if got := counterValue(sum, "controller_runtime_reconcile_total", "controller", "job"); got != 18 {
		t.Errorf("reconciles of the job controller summed to %v, want 18 (10 + 7 + 1)", got)
	}
	if got := counterValue(sum, "controller_runtime_reconcile_total", "controller", "workercluster"); got != 4 {
		t.Errorf("a series only one replica has: %v, want 4", got)
	}
	h := sum["jobferry_status_sync_lag_seconds"].GetMetric()[0].GetHistogram()
	var buckets []uint64
	for _, b := range h.GetBucket() {
		buckets = append(buckets, b.GetCumulativeCount())
	}
	if h.GetSampleCount() != 9 || h.GetSampleSum() != 23.5 || len(buckets) != 3 || buckets[0] != 3 || buckets[1] != 6 || buckets[2] != 9 {
		t.Errorf("histogram summed to count %d, sum %v, buckets %v; want 9, 23.5, [3 6 9]", h.GetSampleCount(), h.GetSampleSum(), buckets)
	}
	if leader["controller_runtime_reconcile_total"].GetMetric()[0].GetCounter().GetValue() != 10 {
		t.Error("adding changed the scrape it added from")
	}
	if _, ok := sum["leader_election_master_status"]; !ok {
		t.Error("a family only one replica has is missing from the sum")
	}
}

func TestFirstCompleteAfterSkipsEarlierAndUnfinishedJobs(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 26, 10, 0, s, 0, time.UTC) }
	o := newObserver()
	o.jobs["before-the-kill"] = &jobTimes{complete: at(1)}
	o.jobs["still-running"] = &jobTimes{}
	o.jobs["second"] = &jobTimes{complete: at(30)}
	o.jobs["first"] = &jobTimes{complete: at(20)}
	got, ok := o.firstCompleteAfter(at(10))
	if !ok || !got.Equal(at(20)) {
		t.Errorf("firstCompleteAfter = %v, %v; want %v", got, ok, at(20))
	}
	if _, ok := o.firstCompleteAfter(at(31)); ok {
		t.Error("a Job is found Complete after the last completion")
	}
}

func TestLagSinceCountsOnlyMirrorsCompletedFromThen(t *testing.T) {
	at := func(ms int) time.Time { return time.Date(2026, 11, 26, 10, 0, 0, ms*int(time.Millisecond), time.UTC) }
	o := newObserver()
	o.jobs["waited-for-the-takeover"] = &jobTimes{mirrorComplete: at(0), complete: at(17000)}
	o.jobs["after"] = &jobTimes{mirrorComplete: at(20000), complete: at(20100)}
	o.jobs["not-copied-yet"] = &jobTimes{mirrorComplete: at(21000)}
	got := o.lagSince(at(17000))
	if got.Count != 1 || got.Max != 0.1 {
		t.Errorf("lagSince = %+v; want one Job lagging 0.1 s", got)
	}
}
