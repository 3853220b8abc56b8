package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"
)

func TestPercentilesNearestRank(t *testing.T) {
	var values []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		values = append(values, time.Duration(i)*time.Second)
	}
	got := percentiles(values)
	want := Percentiles{Count: 100, P50: 50, P95: 95, P99: 99, Max: 100}
	if got != want {
		t.Errorf("percentiles(1..100 s) = %+v, want %+v", got, want)
	}
	if got := percentiles([]time.Duration{3 * time.Second}); got != (Percentiles{Count: 1, P50: 3, P95: 3, P99: 3, Max: 3}) {
		t.Errorf("one value: %+v", got)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("no values: %+v", got)
	}
}

func TestSummariseTimesEachStage(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	jobs := map[string]*jobTimes{
		"a": {created: at(0), placed: at(0.25), mirrorSeen: at(0.5), mirrorComplete: at(2), complete: at(2.25)},
		"b": {created: at(1), placed: at(1.5), mirrorSeen: at(2), mirrorComplete: at(4), complete: at(5)},
		// Still running: counts for dispatch overhead only.
		"c": {created: at(2), mirrorSeen: at(3)},
		// Seen by a watch but never created by the bench: ignored.
		"d": {complete: at(9)},
	}
	got := summarise(jobs)
	if got.Duration != 5 || got.Throughput != 2.0/5 {
		t.Errorf("duration %v s, throughput %v Jobs/s; want 5 s (first create to last Complete) and 0.4", got.Duration, got.Throughput)
	}
	if got.CreateToComplete.Count != 2 || got.CreateToComplete.Max != 4 || got.CreateToComplete.P50 != 2.25 {
		t.Errorf("create→Complete %+v, want 2 Jobs, p50 2.25 s, max 4 s", got.CreateToComplete)
	}
	if got.DispatchOverhead.Count != 3 || got.DispatchOverhead.Max != 1 || got.DispatchOverhead.P50 != 1 {
		t.Errorf("dispatch overhead %+v, want 3 Jobs (0.5, 1, 1 s)", got.DispatchOverhead)
	}
	if got.PlacementWait.Count != 2 || got.PlacementWait.P50 != 0.25 || got.PlacementWait.Max != 0.5 {
		t.Errorf("waiting for room %+v, want 0.25 s and 0.5 s", got.PlacementWait)
	}
	if got.MirrorAfterPlacement.Count != 2 || got.MirrorAfterPlacement.P50 != 0.25 || got.MirrorAfterPlacement.Max != 0.5 {
		t.Errorf("placed → mirror seen %+v, want 0.25 s and 0.5 s", got.MirrorAfterPlacement)
	}
	if got.StatusCopyLag.Count != 2 || got.StatusCopyLag.P50 != 0.25 || got.StatusCopyLag.Max != 1 {
		t.Errorf("status-copy lag %+v, want 0.25 s and 1 s", got.StatusCopyLag)
	}
	if len(got.Completions) != 2 || got.Completions[0] != 2.25 || got.Completions[1] != 5 {
		t.Errorf("completion curve %v, want [2.25 5]", got.Completions)
	}
	if got.QuotaWait.Count != 0 || got.AdmissionAfterPlacement.Count != 0 {
		t.Errorf("Kueue's stages timed for Jobs Kueue never saw: %+v, %+v", got.QuotaWait, got.AdmissionAfterPlacement)
	}
}

func TestSummariseTimesKueuesStages(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	jobs := map[string]*jobTimes{
		"a": {created: at(0), quotaReserved: at(0.5), placed: at(0.75), admitted: at(1.5), mirrorSeen: at(2), mirrorComplete: at(3), complete: at(3.25)},
		// Quota reserved, then waiting for a worker with room.
		"b": {created: at(1), quotaReserved: at(2)},
	}
	got := summarise(jobs)
	for name, c := range map[string]struct {
		got  Percentiles
		want float64
	}{
		"quota reserved → placed":         {got.PlacementAfterQuota, 0.25},
		"placed → admitted (unsuspended)": {got.AdmissionAfterPlacement, 0.75},
		"admitted → mirror seen":          {got.MirrorAfterAdmission, 0.5},
	} {
		if c.got.Count != 1 || c.got.P50 != c.want {
			t.Errorf("%s: %+v, want one Job, %v s", name, c.got, c.want)
		}
	}
	if got.QuotaWait.Count != 2 || got.QuotaWait.P50 != 0.5 || got.QuotaWait.Max != 1 {
		t.Errorf("created → quota reserved %+v, want 0.5 s and 1 s", got.QuotaWait)
	}
	if got.DispatchOverhead.Count != 1 || got.DispatchOverhead.P50 != 2 {
		t.Errorf("dispatch overhead %+v, want one Job, 2 s", got.DispatchOverhead)
	}
}

func TestWriteCountsSumsWriteVerbsByResource(t *testing.T) {
	metric := func(verb, resource, sub string, v float64) *dto.Metric {
		return &dto.Metric{
			Label: []*dto.LabelPair{
				{Name: proto.String("verb"), Value: proto.String(verb)},
				{Name: proto.String("resource"), Value: proto.String(resource)},
				{Name: proto.String("subresource"), Value: proto.String(sub)},
				{Name: proto.String("code"), Value: proto.String("200")},
			},
			Counter: &dto.Counter{Value: proto.Float64(v)},
		}
	}
	families := map[string]*dto.MetricFamily{"apiserver_request_total": {Metric: []*dto.Metric{
		metric("POST", "jobs", "", 10),
		metric("PUT", "jobs", "status", 4),
		metric("PUT", "jobs", "status", 1), // another code
		metric("DELETE", "pods", "", 3),
		metric("GET", "jobs", "", 100),
		metric("LIST", "pods", "", 100),
		metric("WATCH", "pods", "", 100),
	}}}
	got := writeCounts(families)
	want := map[string]float64{"jobs POST": 10, "jobs/status PUT": 5, "pods DELETE": 3}
	if len(got) != len(want) {
		t.Fatalf("writeCounts = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("writeCounts[%s] = %v, want %v", k, got[k], v)
		}
	}
	per := perJob(map[string]float64{"jobs POST": 4, "pods DELETE": 3}, got, 2)
	if per["jobs POST"] != 3 || per["jobs/status PUT"] != 2.5 || len(per) != 2 {
		t.Errorf("perJob = %v, want jobs 3 and jobs/status 2.5 (pods did not grow)", per)
	}
}

// Every call of an admission webhook counts, allowed or refused, by webhook
// and operation; the report lists them per Job beside the arms.
func TestWebhookCallsCountEveryCallByWebhookAndOperation(t *testing.T) {
	metric := func(name, operation, rejected string, calls uint64) *dto.Metric {
		return &dto.Metric{
			Label: []*dto.LabelPair{
				{Name: proto.String("name"), Value: proto.String(name)},
				{Name: proto.String("operation"), Value: proto.String(operation)},
				{Name: proto.String("rejected"), Value: proto.String(rejected)},
				{Name: proto.String("type"), Value: proto.String("validating")},
			},
			Histogram: &dto.Histogram{SampleCount: proto.Uint64(calls)},
		}
	}
	families := map[string]*dto.MetricFamily{"apiserver_admission_webhook_admission_duration_seconds": {Metric: []*dto.Metric{
		metric("budget.jobferry.dev", "UPDATE", "false", 7),
		metric("budget.jobferry.dev", "UPDATE", "true", 1),
		metric("validate.jobferry.dev", "CREATE", "false", 10),
	}}}
	got := webhookCalls(families)
	if got["budget.jobferry.dev UPDATE"] != 8 || got["validate.jobferry.dev CREATE"] != 10 || len(got) != 2 {
		t.Errorf("webhookCalls = %v, want 8 budget updates and 10 validated creations", got)
	}
	res := &Result{HostCPUs: 2, Workers: 2, Runs: []Run{{N: 1000,
		Jobferry: Arm{WebhookCalls: map[string]float64{"manager/validate.jobferry.dev CREATE": 1}},
		Kueue:    &Arm{WebhookCalls: map[string]float64{"manager/validate.jobferry.dev CREATE": 1, "manager/budget.jobferry.dev UPDATE": 2}},
	}}}
	md := Markdown(res)
	for _, want := range []string{"Admission webhook calls per Job", "| manager/budget.jobferry.dev UPDATE | 0.00 | 0.00 | 2.00 |", "| manager/validate.jobferry.dev CREATE | 0.00 | 1.00 | 1.00 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestCPUSplitHalvesTheHost(t *testing.T) {
	for _, tc := range []struct {
		cpus             int
		manager, workers string
		ok               bool
	}{
		{1, "", "", false},
		{2, "0", "1", true},
		{3, "0", "1-2", true},
		{8, "0-3", "4-7", true},
	} {
		m, w, ok := cpuSplit(tc.cpus)
		if m != tc.manager || w != tc.workers || ok != tc.ok {
			t.Errorf("cpuSplit(%d) = %q, %q, %v; want %q, %q, %v", tc.cpus, m, w, ok, tc.manager, tc.workers, tc.ok)
		}
	}
}

func TestMarkdownReportsRatioAndAddedWrites(t *testing.T) {
	res := &Result{Started: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 2, ManagerCPUs: "0", WorkerCPUs: "1",
		Runs: []Run{{
			N:        1000,
			Direct:   Arm{timings: timings{Throughput: 20}, WritesTotal: map[string]float64{"worker-1": 6, "worker-2": 6}},
			Jobferry: Arm{timings: timings{Throughput: 18}, WritesTotal: map[string]float64{"manager": 3.5, "worker-1": 6.5, "worker-2": 6.25}},
			Ratio:    0.9,
		}}}
	md := Markdown(res)
	for _, want := range []string{"| 1000 | 20.0 | 18.0 | 0.90 |", "| 1000 | 3.50 | 12.00 | 12.75 | +0.75 |", "manager cluster on CPU 0, workers on CPU 1", "completions-1000.png"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkdownSaysHowFarAnArmGot(t *testing.T) {
	res := &Result{HostCPUs: 2, Workers: 2, ArmLimitSeconds: 900,
		Runs: []Run{{
			N:        5000,
			Direct:   Arm{timings: timings{Throughput: 1.2}, Unfinished: "1080 of 5000 Complete in 15m0s"},
			Jobferry: Arm{timings: timings{Throughput: 8.1}},
			Ratio:    6.75,
		}}}
	md := Markdown(res)
	for _, want := range []string{"| 5000 | 1.2 (unfinished: 1080 of 5000 Complete in 15m0s) | 8.1 | 6.75 |", "Every arm had 15m0s for its Jobs to complete"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestArmLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		kind      armKind
		n         int
		limit     time.Duration
		mayRunOut bool
	}{
		{"a stuck direct arm fails the run", Config{}, directArm, 5000, timeout(5000), false},
		{"a stuck jobferry arm fails the run", Config{}, jobferryArm, 1000, timeout(1000), false},
		{"MultiKueue's may run out", Config{}, multiKueueArm, 1000, multiKueueTimeout(1000), true},
		{"under a limit every arm may", Config{ArmLimit: 12 * time.Minute}, directArm, 5000, 12 * time.Minute, true},
		{"MultiKueue's too, with the limit", Config{ArmLimit: time.Minute}, multiKueueArm, 1000, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, mayRunOut := armLimit(tc.cfg, tc.kind, tc.n)
			if limit != tc.limit || mayRunOut != tc.mayRunOut {
				t.Errorf("armLimit = %s, %v; want %s, %v", limit, mayRunOut, tc.limit, tc.mayRunOut)
			}
		})
	}
}

func TestMarkdownReportsTheKueueArmAgainstBoth(t *testing.T) {
	p := func(p50, p99 float64) Percentiles {
		return Percentiles{Count: 1, P50: p50, P95: p99, P99: p99, Max: p99}
	}
	kueueArm := Arm{
		timings:     timings{Throughput: 9, CreateToComplete: p(30, 70), QuotaWait: p(2, 4)},
		WritesTotal: map[string]float64{"manager": 12}, CPU: map[string]float64{kueueProcess: 0.02, managerProcess: 0.015},
		Writes: map[string]map[string]float64{"manager": {"workloads POST": 1}},
	}
	res := &Result{Started: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 2, Kueue: true,
		Runs: []Run{{
			N:        1000,
			Direct:   Arm{timings: timings{Throughput: 12}},
			Jobferry: Arm{timings: timings{Throughput: 12, CreateToComplete: p(25, 60)}, WritesTotal: map[string]float64{"manager": 7}, CPU: map[string]float64{managerProcess: 0.012}},
			Kueue:    &kueueArm, Ratio: 1, KueueRatio: 0.75, KueueToJobferry: 0.75,
		}}}
	md := Markdown(res)
	for _, want := range []string{
		"| 1000 | 9.0 | 0.75 | 0.75 | 30.0 s / 70.0 s | +5.0 s / +10.0 s |",
		"| 1000 | 2.00 / 4.00 / 4.00 / 4.00 s | – |",
		"| 1000 | 7.00 → 12.00 | 0.00 → 0.00 | 0.0200; 0.0000 | 0.0120 → 0.0150 |",
		"| cluster | resource, verb | direct | jobferry | Kueue |",
		"| manager | workloads POST | 0.00 | 0.00 | 1.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkdownSetsTheFourArmsSideBySide(t *testing.T) {
	p := func(p50, p99 float64) Percentiles {
		return Percentiles{Count: 10, P50: p50, P95: p99, P99: p99, Max: p99}
	}
	kueueArm := Arm{timings: timings{Throughput: 9, CreateToRunning: p(3, 8)}, WritesTotal: map[string]float64{"manager": 12, "worker-1": 2, "worker-2": 3}}
	multiKueueArm := Arm{
		timings:     timings{Throughput: 3, CreateToRunning: p(40, 80), CreateToComplete: p(41, 81), QuotaWait: p(1, 2)},
		WritesTotal: map[string]float64{"manager": 6, "worker-1": 4},
		CPU:         map[string]float64{kueueProcess: 0.02, "worker-1/kueue": 0.01, "worker-2/kueue": 0.03},
		Placement:   &Placement{Workers: []WorkerPlacement{{Worker: "worker-1", Placed: 7, PeakRunning: 5}, {Worker: "worker-2", Placed: 3, PeakRunning: 3}}},
		Unfinished:  "10 of 12 Complete in 10m0s",
	}
	res := &Result{Started: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 2, Kueue: true, MultiKueue: true, KueueClientQPS: 200,
		Runs: []Run{{
			N: 10, Direct: Arm{timings: timings{Throughput: 12}}, Jobferry: Arm{timings: timings{Throughput: 12}},
			Kueue: &kueueArm, MultiKueue: &multiKueueArm, KueueToMultiKueue: 3,
		}}}
	md := Markdown(res)
	for _, want := range []string{
		"| 10 | MultiKueue (unfinished: 10 of 12 Complete in 10m0s) | 3.0 | 0.25 | 40.0 / 80.0 s (10) | 41.0 / 81.0 s | – | 6.00 / 4.00 | 0.0200 / 0.0400 | worker-1 7 (5), worker-2 3 (3) |",
		"| 10 | Kueue + jobferry | 9.0 | 0.75 | 3.0 / 8.0 s (10) |",
		"| 10 (MultiKueue unfinished: 10 of 12 Complete in 10m0s; its figures are of those) | 3.00× | 0.10× | 1.00 / 2.00 / 2.00 / 2.00 s |",
		"QPS 200, burst 200",
		"| process | direct | jobferry | Kueue | MultiKueue |",
		"| workers/kueue | 0.0000 | 0.0000 | 0.0000 | 0.0400 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// The Kueue arm's manager cluster splits into the jobferry arm's manager
// cluster, the Kueue-alone arm's workers less the direct arm's, and the
// rest; the Kueue-alone arm gets a column of its own.
func TestMarkdownSplitsTheKueueArm(t *testing.T) {
	direct := Arm{CPU: map[string]float64{"worker-1/kube-apiserver": 0.04, "worker-2/kube-apiserver": 0.04, "manager/kube-apiserver": 0.003},
		WritesTotal: map[string]float64{"worker-1": 9, "worker-2": 9}}
	jobferry := Arm{CPU: map[string]float64{managerProcess: 0.02, apiServerProcess: 0.06}, WritesTotal: map[string]float64{"manager": 10}}
	kueueArm := Arm{CPU: map[string]float64{managerProcess: 0.03, apiServerProcess: 0.25, kueueProcess: 0.02}, WritesTotal: map[string]float64{"manager": 28}}
	alone := Arm{CPU: map[string]float64{"worker-1/kube-apiserver": 0.07, "worker-2/kube-apiserver": 0.07, "worker-1/kueue": 0.01, "worker-2/kueue": 0.01},
		WritesTotal: map[string]float64{"worker-1": 15, "worker-2": 15}}
	res := &Result{Started: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 2, Kueue: true, KueueAlone: true,
		Runs: []Run{{N: 10, Direct: direct, Jobferry: jobferry, Kueue: &kueueArm, KueueAlone: &alone}}}
	md := Markdown(res)
	for _, want := range []string{
		// 0.30 = 0.08 + (0.16 − 0.08) + 0.14; 28 = 10 + (30 − 18) + 6.
		"| 10 | 0.3000 | 0.0800 (27 %) | 0.0800 (27 %) | 0.1400 (47 %) | 0.0300 (10 %) | 0.0200 → 0.0200 | 28.00 = 10.00 + 12.00 + 6.00 |",
		"| process | direct | jobferry | Kueue | Kueue alone |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestHistogramQuantileInterpolatesLikePromQL(t *testing.T) {
	buckets := []bucket{{0.1, 10}, {1, 60}, {10, 100}, {math.Inf(1), 100}}
	for _, tc := range []struct{ q, want float64 }{
		{0.05, 0.05}, // within the first bucket, from 0
		{0.5, 0.82},  // rank 50 of 100: 0.1 + 0.9*(40/50)
		{0.99, 9.775},
	} {
		if got := histogramQuantile(tc.q, buckets); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("histogramQuantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	overflow := []bucket{{1, 1}, {math.Inf(1), 10}}
	if got := histogramQuantile(0.99, overflow); got != 1 {
		t.Errorf("a quantile in the +Inf bucket = %v, want the highest finite bound 1", got)
	}
	if got := histogramQuantile(0.5, []bucket{{1e-8, 0}, {1, -5}, {math.Inf(1), -7}}); got != 0 {
		t.Errorf("counts that went backwards = %v, want 0 (nothing measured)", got)
	}
	if got := histogramQuantile(0.5, []bucket{{1, 0}, {math.Inf(1), 0}}); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
}

func TestQueueFiguresFromTwoScrapes(t *testing.T) {
	const text = `# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="job",le="0.1"} %d
workqueue_queue_duration_seconds_bucket{name="job",le="1"} %d
workqueue_queue_duration_seconds_bucket{name="job",le="+Inf"} %d
workqueue_queue_duration_seconds_sum{name="job"} 0
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="job",le="+Inf"} %d
workqueue_work_duration_seconds_sum{name="job"} %d
workqueue_work_duration_seconds_count{name="job"} %d
workqueue_queue_duration_seconds_count{name="job"} %d
workqueue_queue_duration_seconds_bucket{name="other",le="0.1"} 500
workqueue_queue_duration_seconds_bucket{name="other",le="1"} 500
workqueue_queue_duration_seconds_bucket{name="other",le="+Inf"} 500
workqueue_queue_duration_seconds_sum{name="other"} 0
workqueue_queue_duration_seconds_count{name="other"} 500
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="job",result="success"} %d
controller_runtime_reconcile_total{controller="job",result="error"} 1
controller_runtime_reconcile_total{controller="workercluster",result="success"} 999
`
	parse := func(le01, le1, inf, reconciles int) map[string]*dto.MetricFamily {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(fmt.Sprintf(text, le01, le1, inf, reconciles, reconciles, reconciles, inf, reconciles)))
		if err != nil {
			t.Fatal(err)
		}
		return families
	}
	before := parse(5, 5, 5, 10)
	// 100 more waits: 50 under 0.1 s, 40 more under 1 s, 10 longer.
	after := parse(55, 95, 105, 410)
	got := queueFigures(before, after, 100)
	if got.WorkMean != 1 {
		t.Errorf("mean reconcile %v s, want 1 (400 s over 400 reconciles)", got.WorkMean)
	}
	if got.ReconcilesPerJob != 4 {
		t.Errorf("reconciles per Job %v, want 4 (the job controller's 400 more)", got.ReconcilesPerJob)
	}
	if math.Abs(got.WaitP50-0.1) > 1e-9 || got.WaitP99 != 1 {
		t.Errorf("queue wait p50 %v, p99 %v; want 0.1 (rank 50 ends the first bucket) and 1 (the +Inf bucket's lower bound)", got.WaitP50, got.WaitP99)
	}
}

func TestHeapAllocFromADebugHeapProfile(t *testing.T) {
	profile := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 17\n# TotalAlloc = 99\n# HeapAlloc = 123456\n# HeapSys = 200000\n")
	if got, err := heapAlloc(profile); err != nil || got != 123456 {
		t.Errorf("heapAlloc = %d, %v; want 123456", got, err)
	}
	if _, err := heapAlloc([]byte("# Alloc = 17\n")); err == nil {
		t.Error("a profile without HeapAlloc gave no error")
	}
}

func TestSimulatedReportDerivesTheDispatchCeilingFromCPUPerJob(t *testing.T) {
	res := &Result{Started: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 10, ManagerCPUs: "0", WorkerCPUs: "1",
		Simulated: &SimulatedFigures{Nodes: 100, StartSeconds: 1, RunSeconds: 1},
		Runs: []Run{
			{N: 3000, Jobferry: Arm{timings: timings{MirrorRate: 21.9}, CPU: map[string]float64{managerProcess: 0.0125, apiServerProcess: 0.0275}}},
			{N: 10, Jobferry: Arm{}},
		}}
	md := Markdown(res)
	for _, want := range []string{"| 3000 | 21.9 | 80 Jobs/s | 25 Jobs/s |", "| 10 | 0.0 | — | — |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// A held run reports the dispatch alone: the leader's CPU per Job until all
// were running, and the ceiling it gives, apart from the standby replica.
func TestSimulatedReportDerivesTheDispatchCeilingOfAHeldRun(t *testing.T) {
	res := &Result{Started: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 10, ManagerCPUs: "0", WorkerCPUs: "1",
		Simulated: &SimulatedFigures{Nodes: 100, StartSeconds: 1, RunSeconds: 1, Held: true},
		Runs: []Run{{N: 100000, Jobferry: Arm{Tracked: &Tracked{AllRunningSeconds: 5000,
			CPU: map[string]float64{managerProcess: 0.008, managerProcess + "-2": 0.006, apiServerProcess: 0.02}}}}}}
	md := Markdown(res)
	if want := "| 100000 | 0.0080 | 0.0200 | 125 Jobs/s | 36 Jobs/s |"; !strings.Contains(md, want) {
		t.Errorf("report lacks %q:\n%s", want, md)
	}
}

// A run releasing a sample reports the sample's lag apart, and says how
// the Jobs were released.
func TestSimulatedReportShowsTheSampleLag(t *testing.T) {
	res := &Result{Started: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), HostCPUs: 2, Workers: 10, ManagerCPUs: "0", WorkerCPUs: "1",
		Simulated: &SimulatedFigures{Nodes: 100, StartSeconds: 1, RunSeconds: 1, Held: true, ReleaseRate: 20, ReleaseSample: 2000},
		Runs: []Run{{N: 100000, Jobferry: Arm{Tracked: &Tracked{AllRunningSeconds: 5000,
			Sample: &Sample{Jobs: 2000, Lag: percentiles([]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 900 * time.Millisecond})}}}}}}
	md := Markdown(res)
	for _, want := range []string{"released first 2000 of them at 20 a second while the rest were still tracked", "| 100000 | 2000 | 20 a second | 0.20 / 0.90 / 0.90 / 0.90 s |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// A zombie (a killed replica not yet reaped) has no VmRSS: the RSS sampler
// takes it for gone, as it does a process that no longer exists.
func TestRSSFromStatusTakesAZombieForGone(t *testing.T) {
	rss, err := rssFromStatus("Name:\tmanager\nState:\tS (sleeping)\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
	if err != nil || rss != 1024*1024 {
		t.Errorf("a live process: %d, %v; want 1 MiB", rss, err)
	}
	if _, err := rssFromStatus("Name:\tmanager\nState:\tZ (zombie)\nThreads:\t1\n"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a zombie: %v, want fs.ErrNotExist", err)
	}
	if _, err := rssFromStatus("VmRSS:\tmany kB\n"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an unreadable VmRSS: %v, want a parse error", err)
	}
}
