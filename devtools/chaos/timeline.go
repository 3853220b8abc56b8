package chaos

import (
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// timeline is a History indexed the way the checker reads it: each manager
// Job with its mirrors, each mirror with its pods, each worker's connection.
type timeline struct {
	jobs    map[types.UID]*managerJob
	order   []types.UID // manager Jobs in the order first seen
	workers map[string][]Change
	// workloads are the Workloads' changes in time order (Kueue mode).
	workloads []Change
	end       time.Time // the last change recorded
}

type managerJob struct {
	namespace, name string
	uid             types.UID
	changes         []Change
	mirrors         []*mirrorRecord // in the order first seen
}

type mirrorRecord struct {
	uid     types.UID
	worker  string
	attempt int
	changes []Change
	pods    map[types.UID][]Change
}

// firstSeen is when the mirror was first observed.
func (m *mirrorRecord) firstSeen() time.Time { return m.changes[0].At }

// interval is [from, to); to is zero when the state lasted to the end.
type interval struct{ from, to time.Time }

func (iv interval) ends(end time.Time) time.Time {
	if iv.to.IsZero() {
		return end
	}
	return iv.to
}

// running is when any of the mirror's pods was observed Running.
func (m *mirrorRecord) running() []interval {
	var out []interval
	for _, changes := range m.pods {
		var open *time.Time
		for _, c := range changes {
			isRunning := !c.Deleted && c.Pod.Phase == corev1.PodRunning
			switch {
			case isRunning && open == nil:
				at := c.At
				open = &at
			case !isRunning && open != nil:
				out = append(out, interval{*open, c.At})
				open = nil
			}
		}
		if open != nil {
			out = append(out, interval{from: *open})
		}
	}
	return out
}

func index(changes []Change) *timeline {
	tl := &timeline{jobs: map[types.UID]*managerJob{}, workers: map[string][]Change{}}
	mirrors := map[types.UID]*mirrorRecord{}
	var pods []Change
	for _, c := range changes {
		if c.At.After(tl.end) {
			tl.end = c.At
		}
		switch {
		case c.Kind == KindWorker:
			tl.workers[c.Name] = append(tl.workers[c.Name], c)
		case c.Kind == KindWorkload:
			tl.workloads = append(tl.workloads, c)
		case c.Kind == KindJob && c.Cluster == ManagerCluster:
			j := tl.job(c.UID)
			j.namespace, j.name = c.Namespace, c.Name
			j.changes = append(j.changes, c)
		case c.Kind == KindJob && c.Job.OriginUID != "":
			m := mirrors[c.UID]
			if m == nil {
				m = &mirrorRecord{uid: c.UID, worker: c.Cluster, attempt: c.Job.Attempt, pods: map[types.UID][]Change{}}
				mirrors[c.UID] = m
				j := tl.job(c.Job.OriginUID)
				j.mirrors = append(j.mirrors, m)
			}
			m.changes = append(m.changes, c)
		case c.Kind == KindPod && c.Cluster != ManagerCluster:
			pods = append(pods, c)
		}
	}
	// Pods after mirrors: a pod's watch may deliver it before its Job's.
	for _, c := range pods {
		if m := mirrors[c.Pod.JobUID]; m != nil {
			m.pods[c.UID] = append(m.pods[c.UID], c)
		}
	}
	for _, j := range tl.jobs {
		sort.SliceStable(j.mirrors, func(a, b int) bool { return j.mirrors[a].firstSeen().Before(j.mirrors[b].firstSeen()) })
	}
	return tl
}

func (tl *timeline) job(uid types.UID) *managerJob {
	j := tl.jobs[uid]
	if j == nil {
		j = &managerJob{uid: uid}
		tl.jobs[uid] = j
		tl.order = append(tl.order, uid)
	}
	return j
}

// admitted is when a manager Job's Workloads were Admitted (Kueue keeps the
// condition once they finish), as widely as the history allows: from when
// the API server says the admission happened (a lagging watch delivers it
// later, or skips it) until it was seen to end.
func (tl *timeline) admitted(job types.UID) []interval {
	return workloadIntervals(tl.workloads, func(c Change) bool { return c.Workload.JobUID == job },
		func(w *WorkloadFacts) bool { return w.Admitted },
		func(c Change) time.Time { return earliestOf(c.At, c.Workload.AdmittedSince) },
		func(c Change, _ time.Time) time.Time { return c.At })
}

// holding is when each Workload of a ClusterQueue held quota, as narrowly as
// the history allows: from when it was seen holding until the API server
// says it stopped (a lagging watch delivers the release later).
func (tl *timeline) holding(clusterQueue string) map[types.UID][]interval {
	out := map[types.UID][]interval{}
	for _, c := range tl.workloads {
		if c.Workload.ClusterQueue != clusterQueue || out[c.UID] != nil {
			continue
		}
		uid := c.UID
		out[uid] = workloadIntervals(tl.workloads, func(c Change) bool { return c.UID == uid },
			func(w *WorkloadFacts) bool { return w.Holds() > 0 },
			func(c Change) time.Time { return c.At },
			func(c Change, from time.Time) time.Time {
				return later(from, earliestOf(c.At, c.Workload.ReleasedSince))
			})
	}
	return out
}

// earliestOf is the earlier of an observed time and the API server's time
// of the same change (zero: none).
func earliestOf(observed, server time.Time) time.Time {
	if !server.IsZero() && server.Before(observed) {
		return server
	}
	return observed
}

// workloadIntervals are the intervals a state held for the Workloads pick
// selects: each from when a change brought it (starts) to when a change
// ended it (ends; from is its start).
func workloadIntervals(changes []Change, pick func(Change) bool, state func(*WorkloadFacts) bool,
	starts func(Change) time.Time, ends func(c Change, from time.Time) time.Time) []interval {
	var out []interval
	open := map[types.UID]time.Time{}
	for _, c := range changes {
		if !pick(c) {
			continue
		}
		now := !c.Deleted && state(c.Workload)
		from, was := open[c.UID]
		switch {
		case now && !was:
			open[c.UID] = starts(c)
		case !now && was:
			out = append(out, interval{from, ends(c, from)})
			delete(open, c.UID)
		}
	}
	for _, from := range open {
		out = append(out, interval{from: from})
	}
	return out
}

// lostAt says whether a worker was lost at t: published not Connected as
// Unreachable, and not Connected since at least the lost timeout before t
// (less two seconds: the manager's clock starts at its first failed health
// check, the history's when it saw the status written).
func (tl *timeline) lostAt(worker string, t time.Time, timeout time.Duration) bool {
	var downSince time.Time
	reason := ""
	for _, c := range tl.workers[worker] {
		if c.At.After(t) {
			break
		}
		switch {
		case c.Deleted || c.Worker.Connected:
			downSince, reason = time.Time{}, ""
		case downSince.IsZero():
			downSince, reason = c.At, c.Worker.Reason
		default:
			reason = c.Worker.Reason
		}
	}
	return !downSince.IsZero() && reason == v1alpha1.ReasonUnreachable && t.Sub(downSince) >= timeout-2*time.Second
}

// reconnectedAfter is when a worker was next published Connected after t;
// zero when it never was.
func (tl *timeline) reconnectedAfter(worker string, t time.Time) time.Time {
	for _, c := range tl.workers[worker] {
		if c.At.After(t) && !c.Deleted && c.Worker.Connected {
			return c.At
		}
	}
	return time.Time{}
}

// firstTerminal is a manager Job's first change with a terminal condition.
func (j *managerJob) firstTerminal() *Change {
	for i := range j.changes {
		if j.changes[i].Job.Terminal != "" {
			return &j.changes[i]
		}
	}
	return nil
}

// deletedAt is when the Job was observed deleted (or being deleted); zero
// when it never was.
func (j *managerJob) deletedAt() time.Time {
	for _, c := range j.changes {
		if c.Deleted || c.Job.Deleting {
			return c.At
		}
	}
	return time.Time{}
}

// lastTerminal is the terminal condition a mirror was last observed with.
func (m *mirrorRecord) lastTerminal() (batchv1.JobConditionType, time.Time) {
	for i := len(m.changes) - 1; i >= 0; i-- {
		if t := m.changes[i].Job.Terminal; t != "" {
			return t, m.changes[i].At
		}
	}
	return "", time.Time{}
}

// completedAt is when a mirror was first observed Complete; zero when never.
func (m *mirrorRecord) completedAt() time.Time {
	for _, c := range m.changes {
		if c.Job.Terminal == batchv1.JobComplete {
			return c.At
		}
	}
	return time.Time{}
}
