package chaos

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// history builds a history by hand: the manager Job "job" (UID j), its
// mirrors and their pods, and the workers' connections.
type history []Change

func (h history) job(sec float64, f JobFacts) history {
	return append(h, Change{At: at(sec), Cluster: ManagerCluster, Kind: KindJob, Namespace: "ns", Name: "job", UID: "j", Job: &f})
}

func (h history) jobGone(sec float64) history {
	last := *h.lastJob()
	return append(h, Change{At: at(sec), Cluster: ManagerCluster, Kind: KindJob, Namespace: "ns", Name: "job", UID: "j", Deleted: true, Job: &last})
}

func (h history) lastJob() *JobFacts {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == KindJob && h[i].Cluster == ManagerCluster {
			return h[i].Job
		}
	}
	return &JobFacts{}
}

func (h history) mirror(sec float64, worker string, uid types.UID, attempt int, terminal batchv1.JobConditionType) history {
	return append(h, Change{At: at(sec), Cluster: worker, Kind: KindJob, Namespace: "ns", Name: "job", UID: uid,
		Job: &JobFacts{OriginUID: "j", Attempt: attempt, Terminal: terminal, Indexed: true, Completions: 2}})
}

func (h history) pod(sec float64, worker string, uid, job types.UID, index string, phase corev1.PodPhase) history {
	return append(h, Change{At: at(sec), Cluster: worker, Kind: KindPod, Namespace: "ns", Name: string(uid), UID: uid,
		Pod: &PodFacts{JobUID: job, Index: index, Phase: phase}})
}

func (h history) worker(sec float64, name string, connected bool) history {
	return h.workerWhy(sec, name, connected, "Unreachable")
}

func (h history) workerWhy(sec float64, name string, connected bool, reason string) history {
	f := &WorkerFacts{Connected: connected}
	if !connected {
		f.Reason = reason
	}
	return append(h, Change{At: at(sec), Cluster: ManagerCluster, Kind: KindWorker, Name: name, Worker: f})
}

// done is a Job that ran once on w1 and completed: every rule holds.
func done() history {
	return history{}.
		job(0, JobFacts{}).
		job(1, JobFacts{Worker: "w1", Attempt: 1}).
		mirror(1.1, "w1", "m1", 1, "").
		job(1.2, JobFacts{Worker: "w1", Attempt: 1, MirrorUID: "m1"}).
		pod(1.3, "w1", "p1", "m1", "0", corev1.PodRunning).
		pod(3, "w1", "p1", "m1", "0", corev1.PodSucceeded).
		mirror(3.1, "w1", "m1", 1, batchv1.JobComplete).
		job(3.2, JobFacts{Worker: "w1", Attempt: 1, MirrorUID: "m1", Succeeded: 1, Terminal: batchv1.JobComplete})
}

// lostAndRedispatched: w1 is lost while its mirror runs, the Job runs
// again on w2; the stale mirror's pod on w1 runs on until w1 is back and
// jobferry fences it.
func lostAndRedispatched(fencedAfterReturn float64) history {
	return history{}.
		job(0, JobFacts{}).
		mirror(1, "w1", "m1", 1, "").
		job(1.1, JobFacts{Worker: "w1", Attempt: 1, MirrorUID: "m1"}).
		pod(1.2, "w1", "p1", "m1", "0", corev1.PodRunning).
		worker(5, "w1", false).
		mirror(14, "w2", "m2", 2, "").
		job(14.1, JobFacts{Worker: "w2", Attempt: 2, MirrorUID: "m2"}).
		pod(14.2, "w2", "p2", "m2", "0", corev1.PodRunning).
		worker(30, "w1", true).
		pod(30+fencedAfterReturn, "w1", "p1", "m1", "0", corev1.PodFailed).
		pod(40, "w2", "p2", "m2", "0", corev1.PodSucceeded).
		mirror(40.1, "w2", "m2", 2, batchv1.JobComplete).
		job(40.2, JobFacts{Worker: "w2", Attempt: 2, MirrorUID: "m2", Succeeded: 1, Terminal: batchv1.JobComplete})
}

func facts() Facts {
	return Facts{Bounds: Bounds{StaleMirrorStops: 20 * time.Second, TerminalAfterFaults: time.Minute}, Settled: at(200), WorkerLostTimeout: 8 * time.Second}
}

// Each rule of the checker, attacked: a history that keeps it passes, one
// that breaks it fails with that rule, naming the Job.
func TestCheckFindsEachBrokenPromise(t *testing.T) {
	for name, tc := range map[string]struct {
		h     history
		facts func(Facts) Facts
		want  string // the rule broken; empty: none
		says  string // part of the message
	}{
		"ran once and completed": {h: done()},
		"Complete, then Failed": {
			h:    done().job(4, JobFacts{Worker: "w1", Attempt: 1, MirrorUID: "m1", Succeeded: 1, Terminal: batchv1.JobFailed}),
			want: RuleOneTerminal, says: "Complete at 12:00:03.200, then \"Failed\"",
		},
		"Complete, then not finished": {
			h:    done().job(4, JobFacts{Worker: "w1", Attempt: 1, MirrorUID: "m1", Succeeded: 1}),
			want: RuleOneTerminal,
		},
		"both conditions": {
			h:    done().job(4, JobFacts{Worker: "w1", MirrorUID: "m1", Succeeded: 1, Terminal: batchv1.JobComplete, BothTerminal: true}),
			want: RuleOneTerminal, says: "at once",
		},
		"Complete while its mirror Failed": {
			h: history{}.job(0, JobFacts{}).mirror(1, "w1", "m1", 1, "").mirror(2, "w1", "m1", 1, batchv1.JobFailed).
				job(3, JobFacts{Worker: "w1", MirrorUID: "m1", Terminal: batchv1.JobComplete}),
			want: RuleRecordedOutcome, says: "was last seen Failed",
		},
		"Complete while its mirror runs": {
			h: history{}.job(0, JobFacts{}).mirror(1, "w1", "m1", 1, "").
				job(3, JobFacts{Worker: "w1", MirrorUID: "m1", Terminal: batchv1.JobComplete}),
			want: RuleRecordedOutcome, says: "unfinished",
		},
		"Complete from a mirror never seen": {
			h:    history{}.job(0, JobFacts{}).job(3, JobFacts{Worker: "w1", MirrorUID: "m9", Terminal: batchv1.JobComplete}),
			want: RuleRecordedOutcome, says: "never seen",
		},
		"re-dispatched after a loss, the stale mirror fenced in time": {h: lostAndRedispatched(5)},
		"the stale mirror running past the bound": {
			h: lostAndRedispatched(25), want: RuleOneMirrorRunning, says: "25s after w1 came back",
		},
		"two mirrors running, their worker connected": {
			h: history{}.job(0, JobFacts{}).
				mirror(1, "w1", "m1", 1, "").pod(1.2, "w1", "p1", "m1", "0", corev1.PodRunning).
				mirror(2, "w2", "m2", 2, "").pod(2.2, "w2", "p2", "m2", "0", corev1.PodRunning).
				pod(5, "w1", "p1", "m1", "0", corev1.PodSucceeded),
			want: RuleOneMirrorRunning, says: "w1 was not lost",
		},
		"re-dispatched while the worker's credential was refused, not lost": {
			h: func() history {
				h := lostAndRedispatched(5)
				h[4] = history{}.workerWhy(5, "w1", false, "Unauthorized")[0]
				return h
			}(),
			want: RuleOneMirrorRunning, says: "w1 was not lost when attempt 2 was made",
		},
		"re-dispatched before the lost timeout": {
			h: func() history {
				h := lostAndRedispatched(5)
				h[4].At = at(10)
				return h
			}(),
			want: RuleOneMirrorRunning, says: "not lost",
		},
		"the stale mirror's end missed by a broken watch": {
			h: history{}.job(0, JobFacts{}).mirror(1, "w1", "m1", 1, "").
				job(3, JobFacts{Worker: "w1", MirrorUID: "m1", Terminal: batchv1.JobComplete}).
				append(Change{At: at(4), Cluster: "w1", Kind: KindJob, Namespace: "ns", Name: "job", UID: "m1", Deleted: true, Unseen: true, Job: &JobFacts{OriginUID: "j", Attempt: 1}}),
		},
		"two Workloads holding more than the quota": {
			h:     done().workload(0.5, "a", "j", 150, true, false).workload(0.7, "b", "other", 100, true, false),
			facts: withQuota,
			want:  RuleQuota, says: "its Workloads hold 250m CPU, over its quota of 200m",
		},
		"a Workload finished before the next is admitted": {
			h:     done().workload(0.5, "a", "j", 150, true, false).workload(3.5, "a", "j", 150, true, true).workload(3.7, "b", "other", 100, true, false),
			facts: withQuota,
		},
		"an admission seen late, the API server's time of it before the pods ran": {
			h: func() history {
				h := done().workload(0.5, "a", "j", 100, false, false).workload(5, "a", "j", 100, true, false)
				h[len(h)-1].Workload.AdmittedSince = at(1)
				return h
			}(),
			facts: withQuota,
		},
		"a release seen late, the API server's time of it before the next admission": {
			h: func() history {
				h := done().workload(0.5, "a", "j", 150, true, false).workload(0.7, "b", "other", 100, false, false).
					workload(2, "b", "other", 100, true, false).workload(3, "a", "j", 150, true, true)
				h[len(h)-1].Workload.ReleasedSince = at(1)
				return h
			}(),
			facts: withQuota,
		},
		"a queued Job's pods running while it is not admitted": {
			h:     done().workload(0.5, "a", "j", 100, false, false),
			facts: withQuota,
			want:  RuleRunsOnlyAdmitted, says: "while its Workload was not admitted (admitted: never)",
		},
		"a queued Job's pods stopping in time after an eviction": {
			h:     done().workload(0.5, "a", "j", 100, true, false).workload(2, "a", "j", 100, false, false),
			facts: withQuota,
		},
		"a queued Job's pods running on long after an eviction": {
			h: done().workload(0.5, "a", "j", 100, true, false).workload(1.25, "a", "j", 100, false, false).
				pod(1.3, "w1", "p2", "m1", "1", corev1.PodRunning).pod(20, "w1", "p2", "m1", "1", corev1.PodSucceeded),
			facts: withQuota,
			want:  RuleRunsOnlyAdmitted, says: "admitted: 12:00:00.500–12:00:01.250",
		},
		"an earlier attempt completing after the next began, its worker connected": {
			h: history{}.job(0, JobFacts{}).
				mirror(1, "w1", "m1", 1, "").
				mirror(2, "w2", "m2", 2, "").
				mirror(3, "w1", "m1", 1, batchv1.JobComplete),
			want: RuleStaleNeverDone, says: "completed at 12:00:03.000",
		},
		"an index succeeding twice in one mirror that replaces only failed pods": {
			h: func() history {
				h := done()
				h[2].Job.ReplaceOnlyFailed = true
				return h.pod(3.5, "w1", "p9", "m1", "0", corev1.PodRunning).pod(4, "w1", "p9", "m1", "0", corev1.PodSucceeded)
			}(),
			want: RuleIndexOnce, says: "index 0 succeeded in 2 pods",
		},
		"succeeded going back": {
			h:    done().job(4, JobFacts{Worker: "w1", MirrorUID: "m1", Succeeded: 0, Terminal: batchv1.JobComplete}),
			want: RuleCountersMonotonic, says: "1/0 to 0/0",
		},
		"completed indexes going back": {
			h: history{}.job(0, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m1", CompletedIndexes: "0"}).
				job(0.5, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m1", CompletedIndexes: "0,2"}).
				job(1, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m1", CompletedIndexes: "0"}),
			facts: settledLater,
			want:  RuleCountersMonotonic, says: `"0,2" to "0"`,
		},
		"a new attempt recorded before its status replaced the earlier attempt's indexes": {
			h: history{}.job(0, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m1", CompletedIndexes: "1"}).
				job(1, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m2", CompletedIndexes: "1"}).
				job(2, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m2", CompletedIndexes: ""}).
				job(3, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m2", CompletedIndexes: "0"}).
				job(4, JobFacts{Indexed: true, Completions: 3, MirrorUID: "m2", CompletedIndexes: ""}),
			facts: settledLater,
			want:  RuleCountersMonotonic, says: `from "0" to "" (index 0) within one attempt`,
		},
		"a new attempt running its indexes anew": {
			h: history{}.job(0, JobFacts{}).mirror(0.5, "w1", "m1", 1, "").mirror(1, "w2", "m2", 2, batchv1.JobComplete).
				job(0.6, JobFacts{Indexed: true, Completions: 2, MirrorUID: "m1", Succeeded: 1, CompletedIndexes: "1"}).
				job(1.5, JobFacts{Indexed: true, Completions: 2, MirrorUID: "m2", Succeeded: 1, CompletedIndexes: ""}).
				job(2, JobFacts{Indexed: true, Completions: 2, MirrorUID: "m2", Succeeded: 2, CompletedIndexes: "0,1", Terminal: batchv1.JobComplete}),
		},
		"never finished": {
			h:    history{}.job(0, JobFacts{}),
			want: RuleTerminalInTime, says: "not finished when the run settled",
		},
		"finished too late after the last fault": {
			h: done(),
			facts: func(f Facts) Facts {
				f.Bounds.TerminalAfterFaults = time.Second
				return f
			},
			want: RuleTerminalInTime, says: "bound 1s",
		},
		"deleted unfinished, not by its user": {
			h:    history{}.job(0, JobFacts{}).jobGone(2),
			want: RuleTerminalInTime, says: "deleted at 12:00:02.000 unfinished",
		},
		"deleted unfinished by its user": {
			h: history{}.job(0, JobFacts{}).jobGone(2),
			facts: func(f Facts) Facts {
				f.UserDeleted = map[types.UID]time.Time{"j": at(1.9)}
				return f
			},
		},
		"something left on a worker": {
			h: done(),
			facts: func(f Facts) Facts {
				f.Leftovers = []string{"w1: mirror ns/job"}
				return f
			},
			want: RuleNothingLeft, says: "w1: mirror ns/job",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := facts()
			if tc.facts != nil {
				f = tc.facts(f)
			}
			violations, _ := Check(tc.h, f)
			if tc.want == "" {
				for _, v := range violations {
					t.Errorf("unexpected violation: %s", v)
				}
				return
			}
			for _, v := range violations {
				if v.Rule == tc.want && strings.Contains(v.String(), tc.says) {
					return
				}
			}
			t.Errorf("want a %s violation saying %q, got %v", tc.want, tc.says, violations)
		})
	}
}

func (h history) append(c Change) history { return append(h, c) }

func (h history) workload(sec float64, uid, job types.UID, cpu int64, admitted, finished bool) history {
	return append(h, Change{At: at(sec), Cluster: ManagerCluster, Kind: KindWorkload, Namespace: "ns", Name: "wl-" + string(uid), UID: uid,
		Workload: &WorkloadFacts{JobUID: job, ClusterQueue: "cq", Reserved: admitted, Admitted: admitted, Finished: finished, CPU: cpu}})
}

// settledLater: a history whose Job need not finish.
func settledLater(f Facts) Facts {
	f.Bounds.TerminalAfterFaults = time.Hour
	return f
}

func withQuota(f Facts) Facts {
	f.Quota = map[string]int64{"cq": 200}
	f.Bounds.DrainAfterEviction = 10 * time.Second
	return f
}

// A stale mirror on a lost worker is allowed, and counted.
func TestCheckCountsStaleMirrorsOnLostWorkers(t *testing.T) {
	h := lostAndRedispatched(5)
	_, observed := Check(h, facts())
	if observed.StaleRunning != 1 || observed.Redispatched != 1 {
		t.Errorf("observed %+v, want one stale mirror running and one re-dispatch", observed)
	}
}

// The same seed plans the same faults and Jobs; another seed other ones.
func TestPlanIsTheSeeds(t *testing.T) {
	o := Options{Rate: 1}
	a := Plan(7, o, runTiming, time.Minute, 5*time.Second)
	b := Plan(7, o, runTiming, time.Minute, 5*time.Second)
	c := Plan(8, o, runTiming, time.Minute, 5*time.Second)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("plans of one seed: %d and %d faults", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("fault %d differs: %v and %v", i, a[i], b[i])
		}
	}
	same := len(a) == len(c)
	for i := 0; same && i < len(a); i++ {
		same = a[i] == c[i]
	}
	if same {
		t.Errorf("seeds 7 and 8 planned the same faults")
	}
	for _, f := range a {
		if f.Kind == KueueRestarted || f.Offset >= time.Minute {
			t.Errorf("planned %v: Kueue is not in this run, and the span is a minute", f)
		}
	}
	only := Plan(7, Options{Faults: []FaultKind{CredentialRevoked}}, runTiming, time.Minute, 5*time.Second)
	for _, f := range only {
		if f.Kind != CredentialRevoked {
			t.Errorf("planned %s with only %s asked for", f.Kind, CredentialRevoked)
		}
	}
	if len(only) == 0 {
		t.Errorf("no fault planned with only %s asked for", CredentialRevoked)
	}
	w1, w2 := planWorkload(7, o, time.Minute), planWorkload(7, o, time.Minute)
	if len(w1) != 60 || w1[17] != w2[17] {
		t.Errorf("workload of a minute at 1/s: %d Jobs, the 18th %v and %v", len(w1), w1[17], w2[17])
	}
}

// Every fault kind the catalogue lists is one the run knows how to inject,
// and the kinds are the catalogue's, once each.
func TestCatalogueCoversEveryKind(t *testing.T) {
	seen := map[FaultKind]bool{}
	for _, f := range catalogue {
		if seen[f.kind] {
			t.Errorf("%s listed twice", f.kind)
		}
		seen[f.kind] = true
		if f.inject == nil || f.lock == nil || f.lasts == nil || f.applies == nil {
			t.Errorf("%s lacks a part", f.kind)
		}
	}
	for _, k := range []FaultKind{LeaderKilled, StandbyKilled, ManagersDown, WorkerFrozenShort, WorkerFrozenLong, WorkerEtcdRestarted,
		ManagerAPIServerRestarted, CredentialRevoked, WebhookUnreachable, WorkerNamespaceDeleted, NodesLost, KueueRestarted} {
		if !seen[k] {
			t.Errorf("%s is not in the catalogue", k)
		}
	}
}

// The checker run again over a kept record finds what it found in the run.
func TestCheckRecordReadsWhatARunKept(t *testing.T) {
	dir := t.TempDir()
	f := facts()
	f.Faults = []Fault{{Kind: WorkerFrozenLong, Target: "w1", Start: at(4), End: at(20)}}
	f.UserDeleted = map[types.UID]time.Time{"other": at(1)}
	r := &run{o: Options{Dir: dir}}
	h := lostAndRedispatched(25)
	want, _ := Check(h, f)
	if err := r.keep(h, f, &Report{}); err != nil {
		t.Fatal(err)
	}
	got, _, err := CheckRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || len(got) != len(want) || got[0].String() != want[0].String() {
		t.Errorf("from the record: %v; in the run: %v", got, want)
	}
}
