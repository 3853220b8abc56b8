package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A failover run (--sim-failover) runs the manager as two replicas with
// leader election. Once every Job is held running and the leader's memory
// measured, the bench SIGKILLs the leader, releases the Jobs and restarts
// the killed replica (a Deployment would); the Jobs then complete through
// whichever replica takes over. What the bench says of "the manager" is
// then what both replicas did: their CPU, their metrics (the killed one's
// as last scraped before the kill), the peak RSS of either.

// Failover is what a failover run measured.
type Failover struct {
	// KilledAfterSeconds is from the first create to the leader's kill.
	KilledAfterSeconds float64 `json:"killedAfterSeconds"`
	// NewLeader is the replica leading once every Job was Complete.
	NewLeader string `json:"newLeader"`
	// FirstCopySeconds is from the kill to the first manager Job seen
	// Complete: the new leader's first status copy.
	FirstCopySeconds float64 `json:"firstCopySeconds"`
	// LagAfterTakeover is the status-copy lag of the Jobs whose mirror
	// completed after that first copy: the new leader's steady state.
	LagAfterTakeover Percentiles `json:"lagAfterTakeover"`
	// Mirrors counts the Jobs by how many mirrors the workers hold of them
	// once all are Complete: every Job should have exactly one.
	JobsWithOneMirror  int `json:"jobsWithOneMirror"`
	JobsWithTwoOrMore  int `json:"jobsWithTwoOrMoreMirrors"`
	JobsWithoutAMirror int `json:"jobsWithoutAMirror"`
	// leader is NewLeader's index among the replicas.
	leader int
}

// retired is what the bench read of a manager replica it killed, just
// before the kill: its CPU seconds (cpuKey, as processCPU names it) and
// its metrics.
type retired struct {
	cpuKey  string
	cpu     float64
	metrics map[string]*dto.MetricFamily
}

// scrapeManager reads the metrics of every manager replica, summed, with
// those of the replicas killed during the arm as they last were.
func (b *bencher) scrapeManager(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	sum := map[string]*dto.MetricFamily{}
	for _, r := range b.env.Replicas {
		families, err := scrape(ctx, r.MetricsURL)
		if err != nil {
			return nil, err
		}
		addFamilies(sum, families)
	}
	for _, r := range b.retired {
		addFamilies(sum, r.metrics)
	}
	return sum, nil
}

// addFamilies adds the counters, gauges and histograms of from to those of
// into with the same name and labels (histograms with the same buckets),
// in place: the sum of several processes' metrics.
func addFamilies(into, from map[string]*dto.MetricFamily) {
	for name, f := range from {
		target := into[name]
		if target == nil {
			into[name] = proto.Clone(f).(*dto.MetricFamily)
			continue
		}
		for _, m := range f.GetMetric() {
			if same := sameLabels(target, m); same != nil {
				addMetric(same, m)
			} else {
				target.Metric = append(target.Metric, proto.Clone(m).(*dto.Metric))
			}
		}
	}
}

// sameLabels is the metric of f with exactly m's labels, or nil.
func sameLabels(f *dto.MetricFamily, m *dto.Metric) *dto.Metric {
	key := labelKey(m)
	for _, other := range f.GetMetric() {
		if labelKey(other) == key {
			return other
		}
	}
	return nil
}

func labelKey(m *dto.Metric) string {
	key := ""
	for _, l := range m.GetLabel() {
		key += l.GetName() + "=" + l.GetValue() + "\x00"
	}
	return key
}

func addMetric(into, from *dto.Metric) {
	switch {
	case into.Counter != nil && from.Counter != nil:
		into.Counter.Value = proto.Float64(into.Counter.GetValue() + from.Counter.GetValue())
	case into.Gauge != nil && from.Gauge != nil:
		into.Gauge.Value = proto.Float64(into.Gauge.GetValue() + from.Gauge.GetValue())
	case into.Histogram != nil && from.Histogram != nil:
		h, g := into.Histogram, from.Histogram
		h.SampleCount = proto.Uint64(h.GetSampleCount() + g.GetSampleCount())
		h.SampleSum = proto.Float64(h.GetSampleSum() + g.GetSampleSum())
		for i, bucket := range h.GetBucket() {
			if i < len(g.GetBucket()) && g.GetBucket()[i].GetUpperBound() == bucket.GetUpperBound() {
				bucket.CumulativeCount = proto.Uint64(bucket.GetCumulativeCount() + g.GetBucket()[i].GetCumulativeCount())
			}
		}
	}
}

// leader is the index of the replica whose leader_election_master_status
// is 1, or -1 while none leads.
func (b *bencher) leader(ctx context.Context) (int, error) {
	for i, r := range b.env.Replicas {
		families, err := scrape(ctx, r.MetricsURL)
		if err != nil {
			return -1, err
		}
		for _, m := range families["leader_election_master_status"].GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return i, nil
			}
		}
	}
	return -1, nil
}

// killLeader SIGKILLs the leading replica, which must be the first (the
// one the bench measured), keeping what it read of it last, then calls
// afterKill (the release of the held Jobs) and restarts it. It returns
// when the replica was killed.
func (b *bencher) killLeader(ctx context.Context, afterKill func() error) (time.Time, error) {
	leader, err := b.leader(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if leader != 0 {
		return time.Time{}, fmt.Errorf("failover: replica %d leads, not the first, which the bench measured", leader)
	}
	first := b.env.Replicas[0]
	metrics, err := scrape(ctx, first.MetricsURL)
	if err != nil {
		return time.Time{}, err
	}
	cpu, err := cpuSeconds(first.Process.PID)
	if err != nil {
		return time.Time{}, err
	}
	b.retired = append(b.retired, retired{cpuKey: managerProcess, cpu: cpu, metrics: metrics})
	killed := time.Now()
	if err := syscall.Kill(first.Process.PID, syscall.SIGKILL); err != nil {
		return time.Time{}, fmt.Errorf("failover: killing the leader: %w", err)
	}
	if err := afterKill(); err != nil {
		return time.Time{}, err
	}
	if err := b.env.RestartManager(ctx); err != nil {
		return time.Time{}, err
	}
	b.setReplicaPIDs()
	return killed, nil
}

// failoverFigures are what the failover left once every Job is Complete:
// who leads, when the first status was copied after the kill, and how
// many mirrors each Job has on the workers.
func (b *bencher) failoverFigures(ctx context.Context, ns string, n int, o *observer, start, killed time.Time) (*Failover, error) {
	f := &Failover{KilledAfterSeconds: killed.Sub(start).Seconds()}
	leader, err := b.leader(ctx)
	if err != nil {
		return nil, err
	}
	if leader < 0 {
		return nil, fmt.Errorf("failover: no replica leads once every Job is Complete")
	}
	f.NewLeader, f.leader = b.env.Replicas[leader].Process.Name, leader
	first, ok := o.firstCompleteAfter(killed)
	if !ok {
		return nil, fmt.Errorf("failover: no Job was seen Complete after the kill")
	}
	f.FirstCopySeconds = first.Sub(killed).Seconds()
	f.LagAfterTakeover = o.lagSince(first)
	mirrors := map[string]int{}
	for _, w := range b.workers {
		list, err := w.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("failover: listing the mirrors: %w", err)
		}
		for _, m := range list.Items {
			mirrors[m.Labels[v1alpha1.OriginUIDLabel]]++
		}
	}
	jobs, err := b.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failover: listing the Jobs: %w", err)
	}
	if len(jobs.Items) != n {
		return nil, fmt.Errorf("failover: %d Jobs on the manager, want %d", len(jobs.Items), n)
	}
	for _, j := range jobs.Items {
		switch mirrors[string(j.UID)] {
		case 0:
			f.JobsWithoutAMirror++
		case 1:
			f.JobsWithOneMirror++
		default:
			f.JobsWithTwoOrMore++
		}
	}
	// Later figures (the live heap, its profile) are the new leader's.
	b.pprofURL = b.env.Replicas[leader].PprofURL
	return f, nil
}
