package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Report is what a run found: its faults by kind with their recovery times,
// its Jobs by shape and outcome, the creates refused, what jobferry allows
// that was seen, and the violations, each with the history of its Job.
type Report struct {
	Seed       uint64
	Span, Took time.Duration
	Faults     []Fault
	Changes    int
	// ByFault: per kind, how many were injected and skipped, and the
	// recovery times (heal → a canary Job finished).
	ByFault map[FaultKind]*FaultTally
	// ByShape: per shape, how many Jobs ended how.
	ByShape map[string]*ShapeTally
	// ManagerRestarts are the replicas started again after they exited on
	// their own (a lost lease).
	ManagerRestarts []string
	Refused         int
	RefusedBy       map[string]int
	Observed        Observed
	Violations      []Violation
	explanations    []string
	Bounds          Bounds
	LastFaultHealed time.Time
	LastJobFinished time.Time
}

// FaultTally counts one kind of fault.
type FaultTally struct {
	Injected, Skipped, NotRecovered int
	Recovery                        []time.Duration
}

// ShapeTally counts one shape's Jobs by outcome.
type ShapeTally struct {
	Jobs, Complete, Failed, DeletedByUser, Unfinished int
	// EndUnseen: deleted (by its TTL, say) while the history's watch was
	// broken, its end not seen.
	EndUnseen int
}

func newReport(o Options, facts Facts, changes []Change, violations []Violation, observed Observed,
	created map[types.UID]plannedJob, refused int, refusedBy map[string]int, took time.Duration) *Report {
	r := &Report{Seed: o.Seed, Span: o.Span, Took: took, Faults: facts.Faults, Changes: len(changes),
		ByFault: map[FaultKind]*FaultTally{}, ByShape: map[string]*ShapeTally{}, Refused: refused, RefusedBy: refusedBy,
		Observed: observed, Violations: violations, Bounds: facts.Bounds, LastFaultHealed: facts.lastFaultEnd()}
	for _, f := range facts.Faults {
		t := r.ByFault[f.Kind]
		if t == nil {
			t = &FaultTally{}
			r.ByFault[f.Kind] = t
		}
		switch {
		case f.Skipped != "" || f.Start.IsZero():
			t.Skipped++
		case f.Recovered.IsZero():
			t.Injected++
			t.NotRecovered++
		default:
			t.Injected++
			t.Recovery = append(t.Recovery, f.Recovered.Sub(f.End))
		}
	}
	tl := index(changes)
	for _, uid := range tl.order {
		j := tl.jobs[uid]
		if len(j.changes) == 0 {
			continue
		}
		shape := j.changes[0].Job.Shape
		t := r.ByShape[shape]
		if t == nil {
			t = &ShapeTally{}
			r.ByShape[shape] = t
		}
		t.Jobs++
		term := j.firstTerminal()
		_, byUser := facts.UserDeleted[uid]
		last := j.changes[len(j.changes)-1]
		switch {
		case term != nil && term.Job.Terminal == "Complete":
			t.Complete++
		case term != nil:
			t.Failed++
		case byUser:
			t.DeletedByUser++
		case last.Deleted && last.Unseen:
			t.EndUnseen++
		default:
			t.Unfinished++
		}
		if term != nil && term.At.After(r.LastJobFinished) {
			r.LastJobFinished = term.At
		}
	}
	for _, v := range violations {
		r.explanations = append(r.explanations, explain(tl, v))
	}
	return r
}

// Passed: no violation.
func (r *Report) Passed() bool { return len(r.Violations) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run, seed %d: %s of faults and Jobs, %s in all, %d changes recorded\n\n", r.Seed, r.Span, r.Took.Round(time.Second), r.Changes)
	fmt.Fprintf(&b, "%-30s %8s %8s %12s %12s %14s\n", "fault", "injected", "skipped", "recovery p50", "recovery p99", "not recovered")
	for _, kind := range sortedKeys(r.ByFault) {
		t := r.ByFault[kind]
		fmt.Fprintf(&b, "%-30s %8d %8d %12s %12s %14d\n", kind, t.Injected, t.Skipped, percentile(t.Recovery, 50), percentile(t.Recovery, 99), t.NotRecovered)
	}
	fmt.Fprintf(&b, "(recovery: from the fault's heal until a one-second canary Job, sent then to the worker it hit, was finished on the manager)\n\n")
	fmt.Fprintf(&b, "%-24s %6s %9s %7s %16s %11s %11s\n", "Job shape", "Jobs", "Complete", "Failed", "deleted by user", "end unseen", "unfinished")
	total := ShapeTally{}
	row := func(name string, t ShapeTally) {
		fmt.Fprintf(&b, "%-24s %6d %9d %7d %16d %11d %11d\n", name, t.Jobs, t.Complete, t.Failed, t.DeletedByUser, t.EndUnseen, t.Unfinished)
	}
	for _, shape := range sortedKeys(r.ByShape) {
		t := r.ByShape[shape]
		row(shape, *t)
		total.Jobs, total.Complete, total.Failed, total.DeletedByUser = total.Jobs+t.Jobs, total.Complete+t.Complete, total.Failed+t.Failed, total.DeletedByUser+t.DeletedByUser
		total.EndUnseen, total.Unfinished = total.EndUnseen+t.EndUnseen, total.Unfinished+t.Unfinished
	}
	row("all", total)
	fmt.Fprintf(&b, "(end unseen: deleted, by its TTL say, while the history's watch was broken by a fault)\n\n")
	fmt.Fprintf(&b, "Job creates refused and tried again: %d", r.Refused)
	for _, kind := range sortedKeys(r.RefusedBy) {
		fmt.Fprintf(&b, "; %s: %d", kind, r.RefusedBy[kind])
	}
	fmt.Fprintf(&b, "\nre-dispatched Jobs: %d; stale mirrors on lost workers running after the next attempt was made: %d; stale mirrors that finished Complete there: %d; Jobs finished without a mirror: %d; ends the history missed (deleted while a watch was broken): %d\n",
		r.Observed.Redispatched, r.Observed.StaleRunning, r.Observed.StaleCompleted, r.Observed.WithoutMirror, r.Observed.Unseen)
	fmt.Fprintf(&b, "manager replicas that exited on their own (a lost lease) and were started again: %d %v\n", len(r.ManagerRestarts), r.ManagerRestarts)
	if !r.LastFaultHealed.IsZero() && !r.LastJobFinished.IsZero() {
		fmt.Fprintf(&b, "last fault healed %s, last Job finished %s later (bound %s)\n", stamp(r.LastFaultHealed), r.LastJobFinished.Sub(r.LastFaultHealed).Round(time.Second), r.Bounds.TerminalAfterFaults)
	}
	fmt.Fprintf(&b, "\nfaults as they happened:\n")
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	if r.Passed() {
		fmt.Fprintf(&b, "\nviolations: none\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\nviolations: %d (replay: jobferry-dev chaos --seed=%d --span=%s)\n", len(r.Violations), r.Seed, r.Span)
	for i, v := range r.Violations {
		fmt.Fprintf(&b, "\n%d. %s\n%s", i+1, v, r.explanations[i])
	}
	return b.String()
}

// explain prints the history of a violation's Job: the manager Job's
// changes, each mirror's and its pods', in time order.
func explain(tl *timeline, v Violation) string {
	j := tl.jobs[v.UID]
	if j == nil {
		return ""
	}
	var lines []struct {
		at   time.Time
		text string
	}
	add := func(c Change, what string) {
		lines = append(lines, struct {
			at   time.Time
			text string
		}{c.At, fmt.Sprintf("   %s %-10s %s", stamp(c.At), c.Cluster, what)})
	}
	for _, c := range j.changes {
		add(c, "Job "+describeJob(c))
	}
	for _, m := range j.mirrors {
		for _, c := range m.changes {
			add(c, fmt.Sprintf("mirror %s (attempt %d) %s", shortUID(m.uid), m.attempt, describeJob(c)))
		}
		for _, changes := range m.pods {
			for _, c := range changes {
				state := string(c.Pod.Phase)
				if c.Deleted {
					state = "gone"
				} else if c.Pod.Deleting {
					state += ", deleting"
				}
				add(c, fmt.Sprintf("  pod %s of %s index %q: %s", c.Name, shortUID(m.uid), c.Pod.Index, state))
			}
		}
	}
	sort.SliceStable(lines, func(a, b int) bool { return lines[a].at.Before(lines[b].at) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

func describeJob(c Change) string {
	f := c.Job
	parts := []string{}
	if c.Deleted {
		parts = append(parts, "gone")
	}
	if f.Deleting {
		parts = append(parts, "deleting")
	}
	if f.Worker != "" {
		parts = append(parts, "worker="+f.Worker)
	}
	if f.Attempt > 0 && f.OriginUID == "" {
		parts = append(parts, fmt.Sprintf("attempt=%d", f.Attempt))
	}
	if f.MirrorUID != "" {
		parts = append(parts, "mirror="+shortUID(f.MirrorUID))
	}
	if f.Suspend {
		parts = append(parts, "suspended")
	}
	parts = append(parts, fmt.Sprintf("active=%d succeeded=%d failed=%d", f.Active, f.Succeeded, f.Failed))
	if f.CompletedIndexes != "" {
		parts = append(parts, "completed="+f.CompletedIndexes)
	}
	if f.Terminal != "" {
		parts = append(parts, string(f.Terminal))
	}
	return strings.Join(parts, " ")
}

func shortUID(uid types.UID) string {
	if len(uid) > 8 {
		return string(uid[:8])
	}
	return string(uid)
}

func percentile(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)].Round(100 * time.Millisecond).String()
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
