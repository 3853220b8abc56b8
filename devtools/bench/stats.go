package bench

import (
	"math"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Percentiles summarises a distribution of durations, in seconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// percentiles uses the nearest-rank method: the p-th percentile is the
// smallest value at least p percent of the values are at or below.
func percentiles(values []time.Duration) Percentiles {
	if len(values) == 0 {
		return Percentiles{}
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return sorted[max(i, 0)].Seconds()
	}
	return Percentiles{Count: len(sorted), P50: rank(50), P95: rank(95), P99: rank(99), Max: sorted[len(sorted)-1].Seconds()}
}

// jobTimes is what the watches saw of one Job. Zero times were not seen.
type jobTimes struct {
	created time.Time
	// quotaReserved: Kueue first showed quota reserved for the Job's
	// Workload (Kueue arm).
	quotaReserved time.Time
	// placed: the manager Job first showed the worker it was placed on
	// (jobferry and Kueue arms).
	placed time.Time
	// placedOn is the worker it showed then.
	placedOn string
	// admitted: the Job the user created was first seen unsuspended
	// (jobferry unsuspends it as it places it; in the Kueue arm Kueue does,
	// once jobferry's check is Ready).
	admitted time.Time
	// mirrorSeen: the mirror first appeared in a worker's watch (jobferry
	// arm).
	mirrorSeen time.Time
	// mirrorRunningOn is the worker where the mirror runs now (empty when
	// it does not).
	mirrorRunningOn string
	// mirrorComplete: the mirror's Complete condition appeared there.
	mirrorComplete time.Time
	// complete: Complete seen on the Job the user created (the manager Job,
	// or the worker Job in the direct arm).
	complete time.Time
	failed   bool
	// running: the submitted Job was seen with active pods.
	running bool
	// runningSeen: the Job or its mirror was first seen with a ready pod
	// (an active one may still be pending, waiting for room).
	runningSeen time.Time
}

// timings are the distributions an arm reports.
type timings struct {
	CreateToComplete Percentiles `json:"createToComplete"`
	// CreateToRunning: created until the Job or its mirror was first seen
	// with a ready pod (status.ready): when its work started, whatever the
	// dispatcher copies back and when (a Job whose status never showed its
	// pod ready, as when it finished within one status update, does not
	// count).
	CreateToRunning Percentiles `json:"createToRunning"`
	// DispatchOverhead: created on the manager until the mirror is seen on
	// its worker.
	DispatchOverhead Percentiles `json:"dispatchOverhead"`
	// PlacementWait and MirrorAfterPlacement split the dispatch overhead:
	// created until the manager Job shows its worker (the wait for a worker
	// with room), then until the mirror is seen there (the pipeline).
	PlacementWait        Percentiles `json:"placementWait"`
	MirrorAfterPlacement Percentiles `json:"mirrorAfterPlacement"`
	// The Kueue arm's dispatch overhead in four parts: created until Kueue
	// reserved quota (QuotaWait), until jobferry placed it
	// (PlacementAfterQuota: the wait for a worker with room), until Kueue
	// admitted and unsuspended it (AdmissionAfterPlacement), until the
	// mirror was seen on its worker (MirrorAfterAdmission).
	QuotaWait               Percentiles `json:"quotaWait"`
	PlacementAfterQuota     Percentiles `json:"placementAfterQuota"`
	AdmissionAfterPlacement Percentiles `json:"admissionAfterPlacement"`
	MirrorAfterAdmission    Percentiles `json:"mirrorAfterAdmission"`
	// StatusCopyLag: the mirror's Complete seen until the manager Job's.
	StatusCopyLag Percentiles `json:"statusCopyLag"`
	// Throughput is Jobs completed per second, from the first create to the
	// last Complete.
	Throughput float64 `json:"throughputJobsPerSecond"`
	// Duration is from the first create to the last Complete, in seconds.
	Duration float64 `json:"durationSeconds"`
	// Completions are the seconds after the first create at which each Job
	// was seen Complete, sorted: the curve of the plot.
	Completions []float64 `json:"completionSeconds"`
	// CreateRate is Jobs created per second (first to last create), and
	// MirrorRate mirrors seen created per second (first to last mirror):
	// when Jobs come faster than the manager places them, MirrorRate is
	// the manager's dispatch rate.
	CreateRate float64 `json:"createsPerSecond,omitempty"`
	MirrorRate float64 `json:"mirrorsPerSecond,omitempty"`
	// overheads are the dispatch overheads DispatchOverhead summarises,
	// for percentiles over several arms (pooledOverhead).
	overheads []time.Duration
}

// rate is how many of times fell per second from the first to the last.
func rate(times []time.Time) float64 {
	if len(times) < 2 {
		return 0
	}
	first, last := slices.MinFunc(times, time.Time.Compare), slices.MaxFunc(times, time.Time.Compare)
	if d := last.Sub(first).Seconds(); d > 0 {
		return float64(len(times)) / d
	}
	return 0
}

// summarise turns the watches' observations into the arm's timings; only
// Jobs seen created and Complete count.
func summarise(jobs map[string]*jobTimes) timings {
	var first, last time.Time
	var toComplete, toRunning, overhead, placementWait, afterPlacement, lag []time.Duration
	var quotaWait, afterQuota, admission, afterAdmission []time.Duration
	var creates, mirrors []time.Time
	// between appends to, when both were seen, the time from one to to.
	between := func(to *[]time.Duration, from, until time.Time) {
		if !from.IsZero() && !until.IsZero() {
			*to = append(*to, nonNegative(until.Sub(from)))
		}
	}
	for _, j := range jobs {
		if j.created.IsZero() {
			continue
		}
		if first.IsZero() || j.created.Before(first) {
			first = j.created
		}
		creates = append(creates, j.created)
		if !j.mirrorSeen.IsZero() {
			mirrors = append(mirrors, j.mirrorSeen)
		}
		between(&overhead, j.created, j.mirrorSeen)
		between(&toRunning, j.created, j.runningSeen)
		between(&placementWait, j.created, j.placed)
		between(&afterPlacement, j.placed, j.mirrorSeen)
		if !j.quotaReserved.IsZero() {
			between(&quotaWait, j.created, j.quotaReserved)
			between(&afterQuota, j.quotaReserved, j.placed)
			between(&admission, j.placed, j.admitted)
			between(&afterAdmission, j.admitted, j.mirrorSeen)
		}
		if j.complete.IsZero() {
			continue
		}
		if j.complete.After(last) {
			last = j.complete
		}
		toComplete = append(toComplete, nonNegative(j.complete.Sub(j.created)))
		between(&lag, j.mirrorComplete, j.complete)
	}
	t := timings{
		CreateToComplete: percentiles(toComplete), CreateToRunning: percentiles(toRunning), DispatchOverhead: percentiles(overhead), StatusCopyLag: percentiles(lag),
		PlacementWait: percentiles(placementWait), MirrorAfterPlacement: percentiles(afterPlacement),
		QuotaWait: percentiles(quotaWait), PlacementAfterQuota: percentiles(afterQuota),
		AdmissionAfterPlacement: percentiles(admission), MirrorAfterAdmission: percentiles(afterAdmission),
		CreateRate: rate(creates), MirrorRate: rate(mirrors), overheads: overhead,
	}
	if len(toComplete) == 0 {
		return t
	}
	t.Duration = last.Sub(first).Seconds()
	if t.Duration > 0 {
		t.Throughput = float64(len(toComplete)) / t.Duration
	}
	for _, j := range jobs {
		if !j.created.IsZero() && !j.complete.IsZero() {
			t.Completions = append(t.Completions, j.complete.Sub(first).Seconds())
		}
	}
	slices.Sort(t.Completions)
	return t
}

// nonNegative clamps a difference of two watch observations: a Job's
// creation is timed before the request, so it cannot come out negative, but
// two watches of different clusters are not ordered.
func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}

// writeCounts sums apiserver_request_total over write verbs by resource
// (resource/subresource when there is one) and verb: "pods DELETE".
func writeCounts(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	family := families["apiserver_request_total"]
	if family == nil {
		return out
	}
	for _, m := range family.GetMetric() {
		labels := labelsOf(m)
		if !slices.Contains(writeVerbs, labels["verb"]) {
			continue
		}
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		out[resource+" "+labels["verb"]] += m.GetCounter().GetValue()
	}
	return out
}

// webhookCalls counts the calls of every admission webhook
// (apiserver_admission_webhook_admission_duration_seconds, a sample a call,
// allowed or refused) by webhook and operation: "budget.jobferry.dev UPDATE".
func webhookCalls(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	family := families["apiserver_admission_webhook_admission_duration_seconds"]
	if family == nil {
		return out
	}
	for _, m := range family.GetMetric() {
		labels := labelsOf(m)
		out[labels["name"]+" "+labels["operation"]] += float64(m.GetHistogram().GetSampleCount())
	}
	return out
}

// labelsOf is a series' labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// perJob divides the growth of each counter between two snapshots by n,
// leaving out what did not grow.
func perJob(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d / float64(n)
		}
	}
	return out
}

// sum adds up a per-resource (or per-process) map.
func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// cpuSplit halves the host's CPUs as taskset lists: the manager cluster gets
// the lower half, the workers the upper. With one CPU there is nothing to
// split.
func cpuSplit(cpus int) (managerCPUs, workerCPUs string, ok bool) {
	if cpus < 2 {
		return "", "", false
	}
	half := cpus / 2
	return cpuRange(0, half-1), cpuRange(half, cpus-1), true
}

func cpuRange(from, to int) string {
	if from == to {
		return strconv.Itoa(from)
	}
	return strconv.Itoa(from) + "-" + strconv.Itoa(to)
}
