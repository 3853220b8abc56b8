package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobferry/jobferry/internal/jobindex"
)

// Bounds are the times jobferry promises things within; the checker fails a
// run that exceeds them.
type Bounds struct {
	// StaleMirrorStops: after a lost worker is Connected again, the pods of
	// a mirror jobferry re-dispatched from it stop running within this.
	StaleMirrorStops time.Duration
	// DrainAfterEviction: a queued Job's pods stop within this after its
	// Workload stopped being admitted (evicted, preempted).
	DrainAfterEviction time.Duration
	// TerminalAfterFaults: every Job is Complete or Failed within this after
	// the later of the last fault's end, its creation and its user's last
	// action on it (a resume, a parallelism change).
	TerminalAfterFaults time.Duration
}

// DefaultBounds are the bounds the chaos run states (with a worker-lost
// timeout of 8 s and health checks every 2 s).
var DefaultBounds = Bounds{StaleMirrorStops: 60 * time.Second, DrainAfterEviction: 30 * time.Second, TerminalAfterFaults: 4 * time.Minute}

// Facts are what the run knows besides the history: the faults as injected,
// what the workload's user did, and what was left once it settled.
type Facts struct {
	Faults []Fault
	// UserDeleted are the manager Jobs the workload deleted (with when).
	UserDeleted map[types.UID]time.Time
	// LastUserAction is each manager Job's last change by its user.
	LastUserAction map[types.UID]time.Time
	// Leftovers is what the workers still held after the run settled and
	// its Jobs were deleted (mirrors, pods, namespaces jobferry made).
	Leftovers []string
	// Settled is when the run stopped waiting for its Jobs (and deleted
	// its namespace).
	Settled time.Time
	Bounds  Bounds
	// Quota is each ClusterQueue's nominal CPU quota in millicores (Kueue
	// mode).
	Quota map[string]int64
	// WorkerLostTimeout is the manager's --worker-lost-timeout: a worker
	// Unreachable that long is lost, and its Jobs run again elsewhere.
	WorkerLostTimeout time.Duration
}

// lastFaultEnd is when the last fault was healed.
func (f Facts) lastFaultEnd() time.Time {
	var last time.Time
	for _, fault := range f.Faults {
		if fault.End.After(last) {
			last = fault.End
		}
	}
	return last
}

// Rule names, as violations carry them.
const (
	RuleOneTerminal       = "one-terminal-state"
	RuleRecordedOutcome   = "outcome-of-the-recorded-mirror"
	RuleOneMirrorRunning  = "one-mirror-running"
	RuleStaleNeverDone    = "stale-mirror-never-succeeds"
	RuleIndexOnce         = "index-succeeds-once"
	RuleCountersMonotonic = "counters-never-go-back"
	RuleNothingLeft       = "nothing-left-on-workers"
	RuleTerminalInTime    = "terminal-in-time"
	RuleQuota             = "quota-never-exceeded"
	RuleRunsOnlyAdmitted  = "runs-only-while-admitted"
)

// Violation is one broken promise.
type Violation struct {
	Rule string
	// Job is the manager Job involved (namespace/name), UID its UID; empty
	// for a violation about no one Job.
	Job     string    `json:",omitempty"`
	UID     types.UID `json:",omitempty"`
	At      time.Time
	Message string
}

func (v Violation) String() string {
	if v.Job == "" {
		return fmt.Sprintf("%s: %s", v.Rule, v.Message)
	}
	return fmt.Sprintf("%s: %s (UID %s): %s", v.Rule, v.Job, v.UID, v.Message)
}

// Check reads a history and the run's facts and returns every violation of
// what jobferry promises, in the order of their times; and what the run saw
// that is allowed but worth reporting (Observed).
func Check(changes []Change, facts Facts) ([]Violation, Observed) {
	changes = slices.Clone(changes)
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].At.Before(changes[b].At) })
	tl := index(changes)
	c := &checker{tl: tl, facts: facts}
	for _, uid := range tl.order {
		j := tl.jobs[uid]
		if len(j.changes) == 0 {
			// Mirrors of a manager Job the run never saw (another run's).
			continue
		}
		c.oneTerminal(j)
		c.recordedOutcome(j)
		c.mirrorsOneAtATime(j)
		c.indexesOnce(j)
		c.countersMonotonic(j)
		c.terminalInTime(j)
		c.runsOnlyAdmitted(j)
	}
	c.quotaNeverExceeded()
	for _, left := range facts.Leftovers {
		c.violate(RuleNothingLeft, nil, facts.Settled, "left after the run settled: %s", left)
	}
	sort.SliceStable(c.violations, func(a, b int) bool { return c.violations[a].At.Before(c.violations[b].At) })
	return c.violations, c.observed
}

// Observed counts what the run saw that jobferry allows.
type Observed struct {
	// StaleOnLostWorker: mirrors on a lost worker whose pods ran beside
	// the next attempt's (within Bounds.StaleMirrorStops of the worker's
	// return), and of those, how many finished Complete there.
	StaleRunning, StaleCompleted int
	// Redispatched: manager Jobs that had more than one mirror.
	Redispatched int
	// WithoutMirror: manager Jobs that finished with no mirror recorded
	// (nothing to run, say).
	WithoutMirror int
	// Unseen: objects whose end the history missed (deleted while a watch
	// was broken: their last state is the last one seen), so a rule about
	// how they ended could not be checked.
	Unseen int
}

type checker struct {
	tl         *timeline
	facts      Facts
	violations []Violation
	observed   Observed
}

func (c *checker) violate(rule string, j *managerJob, at time.Time, format string, args ...any) {
	v := Violation{Rule: rule, At: at, Message: fmt.Sprintf(format, args...)}
	if j != nil {
		v.Job, v.UID = j.namespace+"/"+j.name, j.uid
	}
	c.violations = append(c.violations, v)
}

// oneTerminal: once Complete or Failed, a manager Job stays so, and never
// carries both.
func (c *checker) oneTerminal(j *managerJob) {
	var first *Change
	for i := range j.changes {
		ch := &j.changes[i]
		if ch.Job.BothTerminal {
			c.violate(RuleOneTerminal, j, ch.At, "Complete and Failed at once")
			return
		}
		switch {
		case first == nil && ch.Job.Terminal != "":
			first = ch
		case first != nil && ch.Job.Terminal != first.Job.Terminal:
			c.violate(RuleOneTerminal, j, ch.At, "%s at %s, then %q", first.Job.Terminal, stamp(first.At), ch.Job.Terminal)
			return
		}
	}
}

// recordedOutcome: a manager Job ends as the mirror it recorded ended.
func (c *checker) recordedOutcome(j *managerJob) {
	term := j.firstTerminal()
	if term == nil {
		return
	}
	if term.Job.MirrorUID == "" {
		if len(j.mirrors) > 0 {
			c.violate(RuleRecordedOutcome, j, term.At, "%s with no mirror recorded, though %d mirrors of it were seen", term.Job.Terminal, len(j.mirrors))
			return
		}
		c.observed.WithoutMirror++
		return
	}
	for _, m := range j.mirrors {
		if m.uid != term.Job.MirrorUID {
			continue
		}
		got, at := m.lastTerminal()
		if last := m.changes[len(m.changes)-1]; got == "" && last.Deleted && last.Unseen {
			c.observed.Unseen++
			return
		}
		if got != term.Job.Terminal {
			c.violate(RuleRecordedOutcome, j, term.At, "%s, but its recorded mirror %s on %s was last seen %s", term.Job.Terminal, m.uid, m.worker, orNotFinished(got, at))
		}
		return
	}
	c.violate(RuleRecordedOutcome, j, term.At, "%s from mirror %s, which was never seen on any worker", term.Job.Terminal, term.Job.MirrorUID)
}

func orNotFinished(terminal batchv1.JobConditionType, at time.Time) string {
	if terminal == "" {
		return "unfinished"
	}
	return string(terminal) + " at " + stamp(at)
}

// mirrorsOneAtATime: two mirrors of one Job never have pods running at
// once, except an earlier attempt's on a worker that was lost (Unreachable
// for the worker-lost timeout) when the next attempt was made, and then
// only until StaleMirrorStops after that worker came back; a mirror
// overtaken while its worker was connected never completes.
func (c *checker) mirrorsOneAtATime(j *managerJob) {
	mirrors := slices.Clone(j.mirrors)
	sort.SliceStable(mirrors, func(a, b int) bool { return mirrors[a].attempt < mirrors[b].attempt })
	if len(mirrors) > 1 {
		c.observed.Redispatched++
	}
	for a := 0; a+1 < len(mirrors); a++ {
		older, next := mirrors[a], mirrors[a+1]
		made := c.madeAt(j, next)
		lost := c.tl.lostAt(older.worker, made, c.facts.WorkerLostTimeout)
		if done := older.completedAt(); !done.IsZero() && done.After(made) {
			if !lost {
				c.violate(RuleStaleNeverDone, j, done, "the mirror of attempt %d on %s (UID %s) completed at %s, after attempt %d was made at %s, while %s was not lost",
					older.attempt, older.worker, older.uid, stamp(done), next.attempt, stamp(made), older.worker)
			} else {
				c.observed.StaleCompleted++
			}
		}
		if lost {
			// Stale: its pods stop within the bound of its worker's return
			// (fenced), whether or not a later attempt still runs.
			back := c.tl.reconnectedAfter(older.worker, made)
			stopped := lastEnd(older.running(), c.tl.end)
			if stopped.After(made) {
				if !back.IsZero() && stopped.After(back.Add(c.facts.Bounds.StaleMirrorStops)) {
					c.violate(RuleOneMirrorRunning, j, stopped, "the mirror of attempt %d on %s (UID %s), overtaken at %s while %s was lost, still had pods running at %s, %s after %s came back (bound %s)",
						older.attempt, older.worker, older.uid, stamp(made), older.worker, stamp(stopped), stopped.Sub(back).Round(time.Second), older.worker, c.facts.Bounds.StaleMirrorStops)
				} else {
					c.observed.StaleRunning++
				}
			}
			continue
		}
		for _, newer := range mirrors[a+1:] {
			if overlap, ok := overlapOf(older.running(), newer.running(), c.tl.end); ok {
				c.violate(RuleOneMirrorRunning, j, overlap.from, "mirrors %s on %s (attempt %d) and %s on %s (attempt %d) had pods running at once from %s to %s, and %s was not lost when attempt %d was made at %s",
					older.uid, older.worker, older.attempt, newer.uid, newer.worker, newer.attempt, stamp(overlap.from), stamp(overlap.ends(c.tl.end)), older.worker, next.attempt, stamp(made))
				break
			}
		}
	}
}

// madeAt is when an attempt was made: the manager Job first showing it
// (jobferry records the attempt before it creates the mirror), or its
// mirror first seen, whichever was earlier (each cluster's watch may lag).
func (c *checker) madeAt(j *managerJob, m *mirrorRecord) time.Time {
	made := m.firstSeen()
	for _, ch := range j.changes {
		if ch.At.After(made) {
			break
		}
		if ch.Job.Attempt >= m.attempt {
			return ch.At
		}
	}
	return made
}

// overlapOf is the span from the first to the last moment two sets of
// intervals overlap.
func overlapOf(xs, ys []interval, end time.Time) (interval, bool) {
	var out interval
	found := false
	for _, x := range xs {
		for _, y := range ys {
			from, to := later(x.from, y.from), earlier(x.ends(end), y.ends(end))
			if !from.Before(to) {
				continue
			}
			if !found || from.Before(out.from) {
				out.from = from
			}
			if !found || to.After(out.to) {
				out.to = to
			}
			found = true
		}
	}
	return out, found
}

// lastEnd is when the last of the intervals ended (end when one lasted).
func lastEnd(ivs []interval, end time.Time) time.Time {
	var last time.Time
	for _, iv := range ivs {
		last = later(last, iv.ends(end))
	}
	return last
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// indexesOnce: within one mirror of an Indexed Job, an index succeeds in one
// pod only — unless the Job lets a replacement start while its predecessor
// terminates (podReplacementPolicy other than Failed) and one of the two was
// being deleted.
func (c *checker) indexesOnce(j *managerJob) {
	for _, m := range j.mirrors {
		if !m.changes[0].Job.Indexed {
			continue
		}
		type success struct {
			pod      types.UID
			at       time.Time
			deleting bool
		}
		byIndex := map[string][]success{}
		for uid, changes := range m.pods {
			deleting := false
			for _, ch := range changes {
				deleting = deleting || ch.Pod.Deleting
				if !ch.Deleted && ch.Pod.Phase == corev1.PodSucceeded {
					byIndex[ch.Pod.Index] = append(byIndex[ch.Pod.Index], success{uid, ch.At, deleting})
					break
				}
			}
		}
		replaceOnlyFailed := m.changes[0].Job.ReplaceOnlyFailed
		for ix, successes := range byIndex {
			if len(successes) < 2 {
				continue
			}
			anyDeleting := false
			for _, s := range successes {
				anyDeleting = anyDeleting || s.deleting
			}
			if !replaceOnlyFailed && anyDeleting {
				continue
			}
			sort.Slice(successes, func(a, b int) bool { return successes[a].at.Before(successes[b].at) })
			c.violate(RuleIndexOnce, j, successes[1].at, "index %s succeeded in %d pods of mirror %s on %s (first %s at %s, again %s at %s)",
				ix, len(successes), m.uid, m.worker, successes[0].pod, stamp(successes[0].at), successes[1].pod, stamp(successes[1].at))
		}
	}
}

// countersMonotonic: a manager Job's succeeded and failed counts never go
// back, nor its completed indexes while it shows one mirror's.
func (c *checker) countersMonotonic(j *managerJob) {
	var prev *Change
	// inherited: the completed indexes the manager Job showed when it
	// recorded its current mirror, an earlier attempt's, which the new
	// attempt's status replaces.
	var inherited jobindex.Intervals
	for i := range j.changes {
		ch := &j.changes[i]
		if ch.Deleted {
			continue
		}
		n := ch.Job
		if prev == nil || n.MirrorUID != prev.Job.MirrorUID {
			inherited = jobindex.Parse(n.CompletedIndexes, int(n.Completions))
		}
		if prev != nil {
			p := prev.Job
			if n.Succeeded < p.Succeeded || n.Failed < p.Failed {
				c.violate(RuleCountersMonotonic, j, ch.At, "succeeded/failed went from %d/%d to %d/%d", p.Succeeded, p.Failed, n.Succeeded, n.Failed)
				return
			}
			// Within one attempt: a new attempt (its mirror lost before it
			// finished) runs its indexes anew, and the manager shows its
			// completedIndexes (succeeded keeps its floor).
			if n.Indexed && n.MirrorUID != "" && n.MirrorUID == p.MirrorUID {
				before := jobindex.Parse(p.CompletedIndexes, int(n.Completions))
				after := jobindex.Parse(n.CompletedIndexes, int(n.Completions))
				if lost, ok := indexLost(before, after, inherited); ok {
					c.violate(RuleCountersMonotonic, j, ch.At, "completed indexes went from %q to %q (index %d) within one attempt", p.CompletedIndexes, n.CompletedIndexes, lost)
					return
				}
			}
		}
		prev = ch
	}
}

// indexLost is an index of before that after lacks and that was not
// inherited from an earlier attempt.
func indexLost(before, after, inherited jobindex.Intervals) (int, bool) {
	for _, r := range before {
		for ix := r.First; ix <= r.Last; ix++ {
			if !after.Has(ix) && !inherited.Has(ix) {
				return ix, true
			}
		}
	}
	return 0, false
}

// terminalInTime: every manager Job its user did not delete ends Complete or
// Failed within Bounds.TerminalAfterFaults of the later of the last fault's
// end, its creation and its user's last action; none disappears unfinished
// unless its user deleted it.
func (c *checker) terminalInTime(j *managerJob) {
	term := j.firstTerminal()
	deleted := j.deletedAt()
	if deleted.After(c.facts.Settled) {
		// The run's clean-up deleted it.
		deleted = time.Time{}
	}
	if term == nil && !deleted.IsZero() && j.changes[len(j.changes)-1].Unseen {
		c.observed.Unseen++
		return
	}
	if _, byUser := c.facts.UserDeleted[j.uid]; byUser && (term == nil || (!deleted.IsZero() && deleted.Before(term.At))) {
		return
	}
	if term == nil && !deleted.IsZero() {
		c.violate(RuleTerminalInTime, j, deleted, "deleted at %s unfinished, not by its user", stamp(deleted))
		return
	}
	from := later(later(j.changes[0].At, c.facts.lastFaultEnd()), c.facts.LastUserAction[j.uid])
	deadline := from.Add(c.facts.Bounds.TerminalAfterFaults)
	switch {
	case term == nil && deadline.After(c.facts.Settled):
		// Not due yet when the run stopped waiting (made after the last
		// fault): the report counts it unfinished.
	case term == nil:
		c.violate(RuleTerminalInTime, j, deadline, "not finished when the run settled at %s (due by %s)", stamp(c.facts.Settled), stamp(deadline))
	case term.At.After(deadline):
		c.violate(RuleTerminalInTime, j, term.At, "%s at %s, %s after %s (bound %s)", term.Job.Terminal, stamp(term.At), term.At.Sub(from).Round(time.Second), stamp(from), c.facts.Bounds.TerminalAfterFaults)
	}
}

// quotaNeverExceeded: at no moment do a ClusterQueue's Workloads hold more
// CPU than its quota (Kueue mode). Each holding is taken as narrowly as the
// history allows (Workload timestamps are to the second, watches lag), so a
// breach shorter than that goes unseen.
func (c *checker) quotaNeverExceeded() {
	for clusterQueue, quota := range c.facts.Quota {
		type edge struct {
			at  time.Time
			cpu int64
			uid types.UID
		}
		cpu := map[types.UID]int64{}
		for _, ch := range c.tl.workloads {
			if ch.Workload.ClusterQueue == clusterQueue && ch.Workload.CPU > 0 {
				cpu[ch.UID] = ch.Workload.CPU
			}
		}
		var edges []edge
		for uid, ivs := range c.tl.holding(clusterQueue) {
			for _, iv := range ivs {
				edges = append(edges, edge{iv.from, cpu[uid], uid}, edge{iv.ends(c.tl.end), -cpu[uid], uid})
			}
		}
		// Releases before admissions at one instant.
		sort.Slice(edges, func(a, b int) bool {
			if !edges[a].at.Equal(edges[b].at) {
				return edges[a].at.Before(edges[b].at)
			}
			return edges[a].cpu < edges[b].cpu
		})
		var total int64
		for _, e := range edges {
			total += e.cpu
			if total > quota {
				j := c.jobOfWorkload(e.uid)
				c.violate(RuleQuota, j, e.at, "ClusterQueue %s: its Workloads hold %dm CPU, over its quota of %dm, once this Job's Workload was admitted at %s",
					clusterQueue, total, quota, stamp(e.at))
				break
			}
		}
	}
}

// jobOfWorkload is the manager Job a Workload queues (nil when not seen).
func (c *checker) jobOfWorkload(uid types.UID) *managerJob {
	for _, ch := range c.tl.workloads {
		if ch.UID == uid {
			return c.tl.jobs[ch.Workload.JobUID]
		}
	}
	return nil
}

// runsOnlyAdmitted: a queued Job's mirror pods run only while its Workload
// is admitted, or within DrainAfterEviction after it stopped being so.
func (c *checker) runsOnlyAdmitted(j *managerJob) {
	admitted := c.tl.admitted(j.uid)
	queued := false
	for _, ch := range c.tl.workloads {
		queued = queued || ch.Workload.JobUID == j.uid
	}
	if !queued {
		return
	}
	allowed := make([]interval, len(admitted))
	for i, iv := range admitted {
		allowed[i] = iv
		if !iv.to.IsZero() {
			allowed[i].to = iv.to.Add(c.facts.Bounds.DrainAfterEviction)
		}
	}
	for _, m := range j.mirrors {
		for _, run := range m.running() {
			if !covered(run, allowed, c.tl.end) {
				c.violate(RuleRunsOnlyAdmitted, j, run.from, "mirror %s on %s had pods running from %s to %s while its Workload was not admitted (admitted: %s)",
					m.uid, m.worker, stamp(run.from), stamp(run.ends(c.tl.end)), describeIntervals(admitted))
				return
			}
		}
	}
}

// covered says whether run lies within one of the intervals.
func covered(run interval, within []interval, end time.Time) bool {
	for _, iv := range within {
		if !run.from.Before(iv.from) && !run.ends(end).After(iv.ends(end)) {
			return true
		}
	}
	return false
}

func describeIntervals(ivs []interval) string {
	if len(ivs) == 0 {
		return "never"
	}
	var parts []string
	for _, iv := range ivs {
		to := "on"
		if !iv.to.IsZero() {
			to = stamp(iv.to)
		}
		parts = append(parts, stamp(iv.from)+"–"+to)
	}
	return strings.Join(parts, ", ")
}

// stamp prints a time as the history does.
func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }
