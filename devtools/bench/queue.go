package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// QueueFigures are what the manager's Job controller reports about its work
// queue during an arm: where a Job's dispatch time goes.
type QueueFigures struct {
	// ReconcilesPerJob: controller_runtime_reconcile_total{controller="job"}.
	ReconcilesPerJob float64 `json:"reconcilesPerJob"`
	// Wait is how long keys waited in the queue, Work how long a reconcile
	// took (workqueue_queue_duration_seconds and _work_duration_seconds,
	// name="job"), estimated from the histograms' buckets.
	WaitP50 float64 `json:"queueWaitP50"`
	WaitP99 float64 `json:"queueWaitP99"`
	WorkP50 float64 `json:"reconcileP50"`
	WorkP99 float64 `json:"reconcileP99"`
	// WorkMean is the mean reconcile time: with the concurrency and the
	// reconciles per Job, it bounds the Jobs per second the queue passes.
	WorkMean float64 `json:"reconcileMean"`
	// CopiesPerJob are the status copies written per Job
	// (jobferry_status_sync_total, written), and CopyLag their lag from the
	// mirror's change seen to the write, running copies included
	// (jobferry_status_sync_lag_seconds).
	CopiesPerJob float64 `json:"statusCopiesPerJob"`
	CopyLagP50   float64 `json:"statusCopyLagP50"`
	CopyLagP99   float64 `json:"statusCopyLagP99"`
}

// scrape reads a Prometheus text endpoint.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics of %s: %w", url, err)
	}
	return families, nil
}

// queueFigures compares two scrapes of the manager.
func queueFigures(before, after map[string]*dto.MetricFamily, n int) QueueFigures {
	reconciles := counterValue(after, "controller_runtime_reconcile_total", "controller", "job") -
		counterValue(before, "controller_runtime_reconcile_total", "controller", "job")
	wait := bucketDelta(before, after, "workqueue_queue_duration_seconds", "name", "job")
	work := bucketDelta(before, after, "workqueue_work_duration_seconds", "name", "job")
	workSum := histogramSum(after, "workqueue_work_duration_seconds", "name", "job") -
		histogramSum(before, "workqueue_work_duration_seconds", "name", "job")
	workMean := 0.0
	if len(work) > 0 && work[len(work)-1].count > 0 {
		workMean = workSum / work[len(work)-1].count
	}
	copies := counterValue(after, "jobferry_status_sync_total", "result", "written") - counterValue(before, "jobferry_status_sync_total", "result", "written")
	lag := bucketDelta(before, after, "jobferry_status_sync_lag_seconds", "", "")
	return QueueFigures{
		ReconcilesPerJob: reconciles / float64(n), WorkMean: workMean,
		WaitP50: histogramQuantile(0.5, wait), WaitP99: histogramQuantile(0.99, wait),
		WorkP50: histogramQuantile(0.5, work), WorkP99: histogramQuantile(0.99, work),
		CopiesPerJob: copies / float64(n), CopyLagP50: histogramQuantile(0.5, lag), CopyLagP99: histogramQuantile(0.99, lag),
	}
}

// hasLabel: the series carries name=value; every series does when name
// is empty (a metric without labels).
func hasLabel(m *dto.Metric, name, value string) bool {
	if name == "" {
		return true
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// counterValue sums a counter's series that carry label=value.
func counterValue(families map[string]*dto.MetricFamily, family, label, value string) float64 {
	total := 0.0
	for _, m := range families[family].GetMetric() {
		if hasLabel(m, label, value) {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// histogramSum sums the _sum of a histogram's series that carry label=value.
func histogramSum(families map[string]*dto.MetricFamily, family, label, value string) float64 {
	total := 0.0
	for _, m := range families[family].GetMetric() {
		if hasLabel(m, label, value) {
			total += m.GetHistogram().GetSampleSum()
		}
	}
	return total
}

// bucket is a histogram bucket: the count of observations at or below upper.
type bucket struct {
	upper float64
	count float64
}

// bucketDelta is the growth of a histogram's cumulative buckets between two
// scrapes, for the series that carry label=value.
func bucketDelta(before, after map[string]*dto.MetricFamily, family, label, value string) []bucket {
	counts := func(families map[string]*dto.MetricFamily) map[float64]float64 {
		out := map[float64]float64{}
		for _, m := range families[family].GetMetric() {
			if !hasLabel(m, label, value) {
				continue
			}
			// The text format lists the +Inf bucket; the sample count is it.
			for _, b := range m.GetHistogram().GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					out[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
			}
			out[math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
		}
		return out
	}
	b, a := counts(before), counts(after)
	var out []bucket
	for upper, c := range a {
		out = append(out, bucket{upper: upper, count: c - b[upper]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].upper < out[j].upper })
	return out
}

// histogramQuantile estimates the q-quantile from cumulative buckets as
// PromQL's histogram_quantile does: linear within the bucket it falls in,
// the highest finite bound when it falls in the +Inf bucket; 0 without
// observations, or when the counts went backwards between the scrapes
// (result.json has no NaN).
func histogramQuantile(q float64, buckets []bucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].count <= 0 {
		return 0
	}
	total := buckets[len(buckets)-1].count
	rank := q * total
	lower, lowerCount := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.upper, 1) {
				return lower
			}
			if b.count == lowerCount {
				return b.upper
			}
			return lower + (b.upper-lower)*(rank-lowerCount)/(b.count-lowerCount)
		}
		lower, lowerCount = b.upper, b.count
	}
	return lower
}
