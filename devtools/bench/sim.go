package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/devtools/simworker"
)

// Simulation runs the bench on simulated workers (package simworker):
// API servers without nodes or pods, whose Jobs the simulator moves through
// their statuses. It measures the manager at a scale real workers cannot
// reach on this machine; ratios against direct submission come from real
// workers, so a simulated run has no direct arm.
type Simulation struct {
	// Nodes each worker pretends to have (a general pool of 16 CPUs and
	// 110 pods a node).
	Nodes  int
	Timing simworker.Timing
	// ReleaseRate releases held Jobs this many a second (0: all at once).
	ReleaseRate float64
	// ReleaseSample, when set, releases only that many first (at
	// ReleaseRate), measures their status-copy lag while the rest are
	// still tracked, then releases the rest at once.
	ReleaseSample int
	// Binary is jobferry-dev, which runs the simulator (simulate-workers)
	// as a process of the workers' CPUs.
	Binary string
}

// SimulatedFigures say what a simulated run's workers were.
type SimulatedFigures struct {
	Nodes        int     `json:"nodesPerWorker"`
	StartSeconds float64 `json:"podStartSeconds"`
	RunSeconds   float64 `json:"podRunSeconds"`
	// Held: every Job was held running until all N were tracked at once,
	// then released, ReleaseRate a second (0: all at once).
	Held          bool    `json:"held,omitempty"`
	ReleaseRate   float64 `json:"releaseRate,omitempty"`
	ReleaseSample int     `json:"releaseSample,omitempty"`
}

// simulatorComponent names the simulator's process (on the first worker's
// cluster: its CPUs, stopped with it).
const simulatorComponent = "simulator"

// simulatedWorkers are the specs of simulated workers: lean API servers
// (localcluster.Spec.APIServerOnly) keeping their objects in the etcd of the
// first, so fifty of them fit on one CPU.
func simulatedWorkers(n int, cpus string) []localcluster.Spec {
	var out []localcluster.Spec
	for i := 1; i <= n; i++ {
		s := localcluster.Spec{Name: fmt.Sprintf("worker-%d", i), APIServerOnly: true, CPUs: cpus}
		if i > 1 {
			s.EtcdOf = "worker-1"
		}
		out = append(out, s)
	}
	return out
}

// SimulateArgs are the simulate-workers arguments for the workers of env.
func SimulateArgs(workers []*localcluster.Cluster, sim Simulation) []string {
	args := []string{"simulate-workers", "--nodes=" + strconv.Itoa(sim.Nodes),
		"--start=" + sim.Timing.Start.String(), "--run-for=" + sim.Timing.RunFor.String(), "--hold=" + strconv.FormatBool(sim.Timing.Hold),
		"--release-rate=" + strconv.FormatFloat(sim.ReleaseRate, 'g', -1, 64), "--release-sample=" + strconv.Itoa(sim.ReleaseSample)}
	for _, w := range workers {
		args = append(args, "--worker="+w.Name+"="+w.KubeconfigPath)
	}
	return args
}

// startSimulator runs the simulator beside the first worker of e, pinned
// to the workers' CPUs and stopped with it (devenv.Options.Simulate).
func startSimulator(sim Simulation) func(context.Context, *devenv.Env) error {
	return func(_ context.Context, e *devenv.Env) error {
		first := e.Workers[0]
		if _, err := first.StartComponent(simulatorComponent, sim.Binary, SimulateArgs(e.Workers, sim)...); err != nil {
			return fmt.Errorf("starting the simulator (log in %s): %w", first.LogDir(), err)
		}
		return nil
	}
}

// SimulatedPool is the pool every simulated worker pretends to have.
func SimulatedPool(nodes int) localcluster.Pool { return devenv.GeneralPool(nodes) }

// simMarkdown renders a simulated run: the manager's figures only.
func simMarkdown(res *Result) string {
	var b strings.Builder
	sim := res.Simulated
	fmt.Fprintf(&b, "# jobferry bench on simulated workers, %s\n\n", res.Started.Format("2006-01-02 15:04 UTC"))
	cleanUp := "once all are Complete the Jobs are deleted one by one on the manager, and writes and CPU include that clean-up."
	if res.KeptJobs {
		cleanUp = "the Jobs were kept once all were Complete (torn down with the clusters), so writes and CPU leave their deletion out."
	}
	split := "not split (every process may use every CPU)"
	if res.ManagerCPUs != "" {
		split = fmt.Sprintf("manager cluster and jobferry manager on CPU %s, simulated workers and the simulator on CPU %s", res.ManagerCPUs, res.WorkerCPUs)
	}
	fmt.Fprintf(&b, "**Simulated workers**: %d API servers (etcd and kube-apiserver, no nodes, no pods, no controllers), each pretending to %d nodes of 16 CPUs; "+
		"the simulator moves every mirror through the statuses kube-controller-manager writes (started %.1f s after its creation, Complete %.1f s later) and publishes each worker's ClusterCapacity from its running Jobs. "+
		"These figures measure the manager; ratios against direct submission come from the real-worker bench. %d host CPUs, %s. One-pod Jobs; every figure observed through watches; %s",
		res.Workers, sim.Nodes, sim.StartSeconds, sim.RunSeconds, res.HostCPUs, split, cleanUp)
	if len(res.ManagerArgs) > 0 {
		fmt.Fprintf(&b, " Manager flags: `%s`.", strings.Join(res.ManagerArgs, " "))
	}
	if len(res.ManagerEnv) > 0 {
		fmt.Fprintf(&b, " Manager environment: `%s`.", strings.Join(res.ManagerEnv, " "))
	}
	b.WriteString("\n\n| N | workers | Jobs/s (first create → last Complete) | creates/s | mirrors/s (dispatch rate) | create→Complete p50 / p99 | create → placed p50 / p95 / p99 / max | placed → mirror p50 / p95 / p99 / max | status-copy lag p50 / p95 / p99 / max |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		j := r.Jobferry
		fmt.Fprintf(&b, "| %d | %d | %.1f | %.1f | %.1f | %.1f s / %.1f s | %s | %s | %s |\n", r.N, res.Workers, j.Throughput, j.CreateRate, j.MirrorRate,
			j.CreateToComplete.P50, j.CreateToComplete.P99, fourPercentiles(j.PlacementWait), fourPercentiles(j.MirrorAfterPlacement), fourPercentiles(j.StatusCopyLag))
	}
	b.WriteString("\n| N | writes/Job manager | writes/Job workers | manager CPU-s/Job | manager's API server CPU-s/Job | manager peak RSS | RSS/Job | live heap/Job | reconciles/Job |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		j := r.Jobferry
		reconciles := 0.0
		if j.Queue != nil {
			reconciles = j.Queue.ReconcilesPerJob
		}
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %.4f | %.4f | %.0f MiB | %.1f KiB | %.1f KiB | %.1f |\n", r.N, j.WritesTotal["manager"], workersTotal(j),
			j.CPU[managerProcess], j.CPU[apiServerProcess], float64(j.ManagerPeakRSS)/(1<<20), j.ManagerRSSPerJob/1024, j.ManagerLiveHeapPerJob/1024, reconciles)
	}
	b.WriteString("\nDispatch ceiling: Jobs a second one CPU carries through their whole life (placed, mirrored, status copied, deleted), from the CPU each spends per Job: " +
		"the manager alone (as when its cluster's API server runs on other machines), and the manager with its API server on one CPU as here, where the measured mirrors/s beside it is bound by both.\n\n" +
		"| N | mirrors/s measured | ceiling, manager alone (1 / its CPU-s per Job) | ceiling, manager and its API server on one CPU |\n|---|---|---|---|\n")
	for _, r := range res.Runs {
		j := r.Jobferry
		fmt.Fprintf(&b, "| %d | %.1f | %s | %s |\n", r.N, j.MirrorRate, perSecond(j.CPU[managerProcess]), perSecond(j.CPU[managerProcess]+j.CPU[apiServerProcess]))
	}
	b.WriteString("\nPlacement: the mirrors made on each worker against its share of them by room (the Jobs its nodes hold at once, every worker's over all), and the most running there at once against its room.\n\n" +
		"| N | workers | room per worker | share per worker | placed min / max | largest deviation from the share | most running at once / room (fullest worker) | workers over their room |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		if p := r.Jobferry.Placement; p != nil {
			b.WriteString(placementRow(r.N, p))
		}
	}
	if sim.Held {
		released := "all at once"
		switch {
		case sim.ReleaseSample > 0:
			released = fmt.Sprintf("first %d of them at %s a second while the rest were still tracked (their status-copy lag below), then the rest at once", sim.ReleaseSample, perSecondRate(sim.ReleaseRate))
		case sim.ReleaseRate > 0:
			released = fmt.Sprintf("%.0f a second (Complete at a steady rate while the rest were still tracked)", sim.ReleaseRate)
		}
		fmt.Fprintf(&b, "\nEvery Job held running until all N were running at once (tracked by the manager together), then released %s: the manager then, after a collection:\n\n", released)
		b.WriteString("| N | all running after | manager RSS | RSS/tracked Job | live heap/tracked Job |\n|---|---|---|---|---|\n")
		for _, r := range res.Runs {
			if t := r.Jobferry.Tracked; t != nil {
				fmt.Fprintf(&b, "| %d | %.0f s | %.0f MiB | %.1f KiB | %.1f KiB |\n", r.N, t.AllRunningSeconds, float64(t.RSS)/(1<<20), t.RSSPerJob/1024, t.LiveHeapPerJob/1024)
			}
		}
		if sim.ReleaseSample > 0 {
			b.WriteString("\nThe sample: the status-copy lag of its Jobs (each mirror seen Complete until its manager Job is), copied while the other Jobs were still tracked.\n\n" +
				"| N | Jobs in the sample | released | status-copy lag p50 / p95 / p99 / max |\n|---|---|---|---|\n")
			for _, r := range res.Runs {
				if t := r.Jobferry.Tracked; t != nil && t.Sample != nil {
					fmt.Fprintf(&b, "| %d | %d | %s a second | %s |\n", r.N, t.Sample.Jobs, perSecondRate(sim.ReleaseRate), fourPercentiles(t.Sample.Lag))
				}
			}
		}
		b.WriteString("\nDispatch alone, from the first create until every Job was running (webhooks, placement, mirror, running status copied; no completion or clean-up): " +
			"CPU-s per Job of the manager (the leader, when replicated) and of its API server, and the Jobs a second one CPU would place and mirror at that cost.\n\n" +
			"| N | manager CPU-s/Job | its API server's | dispatch ceiling, manager alone | manager and its API server on one CPU |\n|---|---|---|---|---|\n")
		for _, r := range res.Runs {
			if t := r.Jobferry.Tracked; t != nil {
				m, a := t.CPU[managerProcess], t.CPU[apiServerProcess]
				fmt.Fprintf(&b, "| %d | %.4f | %.4f | %s | %s |\n", r.N, m, a, perSecond(m), perSecond(m+a))
			}
		}
	}
	if res.Failover {
		b.WriteString("\n**Failover**: the manager ran as two replicas with leader election (its CPU-s, writes and metrics above are both replicas'). Once every Job was running and the leader's memory measured, the bench SIGKILLed the leader, released the Jobs and restarted the killed replica; " +
			"the first status copy after the kill is the first manager Job seen Complete; the lag after the takeover is that of the Jobs whose mirror completed after it. Mirrors are counted per manager Job on the workers once all were Complete.\n\n" +
			"| N | leader killed after | new leader | kill → first status copy | status-copy lag after the takeover p50 / p95 / p99 / max | Jobs with one mirror | with two or more | without a mirror |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Runs {
			if f := r.Jobferry.Failover; f != nil {
				fmt.Fprintf(&b, "| %d | %.0f s | %s | %.1f s | %s | %d | %d | %d |\n", r.N, f.KilledAfterSeconds, f.NewLeader, f.FirstCopySeconds, fourPercentiles(f.LagAfterTakeover),
					f.JobsWithOneMirror, f.JobsWithTwoOrMore, f.JobsWithoutAMirror)
			}
		}
	}
	if res.Shift {
		b.WriteString("\n**Shift**: once a third of the Jobs were created the bench filled the first worker (a Job of its own there, created directly, taking every pod slot of its nodes, as another tenant's load would); once half were, it SIGKILLed the second worker's API server (restarted 15 s later). " +
			"From the moment the first worker's capacity summary showed no slot free (until the end), and from the kill until the restart: the Jobs the manager was still seen placing there, the last of them, and the Jobs placed elsewhere meanwhile. (The filled and the lost worker take fewer Jobs than their share in the placement table above.)\n\n" +
			"| N | worker | event | placed there after it | last placed there after | placed elsewhere after it |\n|---|---|---|---|---|---|\n")
		for _, r := range res.Runs {
			if s := r.Jobferry.Shift; s != nil {
				fmt.Fprintf(&b, "| %d | %s | filled up | %d | %.2f s | %d |\n", r.N, s.Filled.Worker, s.Filled.PlacedAfter, s.Filled.LastPlacedAfterSeconds, s.Filled.PlacedElsewhereAfter)
				fmt.Fprintf(&b, "| %d | %s | lost (API server killed) | %d | %.2f s | %d |\n", r.N, s.Lost.Worker, s.Lost.PlacedAfter, s.Lost.LastPlacedAfterSeconds, s.Lost.PlacedElsewhereAfter)
			}
		}
	}
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "\n## N = %d (simulated workers)\n\n![completed Jobs over time](%s)\n\n", r.N, plotName(r.N))
		b.WriteString("Writes per Job by cluster, resource and verb (`apiserver_request_total`, write verbs; workers summed):\n\n| cluster | resource, verb | jobferry |\n|---|---|---|\n")
		for _, row := range writeRows(r) {
			fmt.Fprintf(&b, "| %s | %s | %.2f |\n", row.cluster, row.resource, row.values[jobferryColumn])
		}
		managerFigures(&b, r.N, "jobferry", r.Jobferry)
		if t := r.Jobferry.Tracked; t != nil && t.DispatchProfileTop != "" {
			fmt.Fprintf(&b, "\nThe manager's CPU profile while it dispatched steadily, %d s from half the Jobs running (`%s`):\n\n```\n%s```\n", profileSeconds, filepath.Base(t.DispatchProfile), t.DispatchProfileTop)
		}
		if t := r.Jobferry.Tracked; t != nil && t.HeapTop != "" {
			fmt.Fprintf(&b, "\nWith all %d Jobs tracked at once, what holds the manager's live heap (`%s`, in-use space):\n\n```\n%s```\n", r.N, filepath.Base(t.HeapProfile), t.HeapTop)
		}
	}
	return b.String()
}

// placementRow is a run's row of the placement table.
func placementRow(n int, p *Placement) string {
	if len(p.Workers) == 0 {
		return fmt.Sprintf("| %d | 0 | — | — | — | — | — | — |\n", n)
	}
	rooms, shares := map[int]bool{}, map[string]bool{}
	placedMin, placedMax := p.Workers[0].Placed, p.Workers[0].Placed
	fullest := p.Workers[0]
	for _, w := range p.Workers {
		rooms[w.Room] = true
		shares[fmt.Sprintf("%.0f", w.Share)] = true
		placedMin, placedMax = min(placedMin, w.Placed), max(placedMax, w.Placed)
		if w.Room > 0 && float64(w.PeakRunning)/float64(w.Room) > float64(fullest.PeakRunning)/float64(max(fullest.Room, 1)) {
			fullest = w
		}
	}
	room, share := "varies", "varies"
	if len(rooms) == 1 {
		room = strconv.Itoa(p.Workers[0].Room)
	}
	if len(shares) == 1 {
		share = fmt.Sprintf("%.0f", p.Workers[0].Share)
	}
	over := "none"
	if len(p.OverCommitted) > 0 {
		over = strings.Join(p.OverCommitted, ", ")
	}
	return fmt.Sprintf("| %d | %d | %s | %s | %d / %d | %.1f %% | %d / %d (%s) | %s |\n", n, len(p.Workers), room, share, placedMin, placedMax,
		100*p.MaxDeviation, fullest.PeakRunning, fullest.Room, fullest.Worker, over)
}

// perSecond is how many Jobs a second one CPU carries at cpuPerJob
// CPU-seconds each.
func perSecond(cpuPerJob float64) string {
	if cpuPerJob <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f Jobs/s", 1/cpuPerJob)
}

// trackAll waits until the simulator holds all n Jobs running, measures the
// manager tracking them at once, and releases them.
func (b *bencher) trackAll(ctx context.Context, o *observer, n int, what, tag string, start time.Time, cpuStart map[string]float64, rssBefore, heapBefore int64) (*Tracked, error) {
	if err := waitRunning(ctx, o, n/2, timeout(n), what+", half of them", b.cfg.Progress); err != nil {
		return nil, err
	}
	// The arm's first profile covers its first profileSeconds (a process
	// takes one CPU profile at a time): a dispatch that reached half
	// within them is in that profile already.
	var dispatchProfile func() (savedProfile, error)
	if time.Since(start) > (profileSeconds+5)*time.Second {
		dispatchProfile = b.profileManager(ctx, "dispatch-"+tag)
	}
	if err := waitRunning(ctx, o, n, timeout(n), what, b.cfg.Progress); err != nil {
		return nil, err
	}
	t := &Tracked{AllRunningSeconds: time.Since(start).Seconds()}
	// The figures below are the first replica's (devenv starts it
	// leading): one that lost the lease would be a standby's.
	if len(b.env.Replicas) > 1 {
		leader, err := b.leader(ctx)
		if err != nil {
			return nil, err
		}
		if leader != 0 {
			return nil, fmt.Errorf("%s: replica %d leads, not the first, which the bench measures: the lease moved during the run (the replicas' logs say why)", what, leader)
		}
	}
	if dispatchProfile != nil {
		profiled, err := dispatchProfile()
		if err != nil {
			return nil, err
		}
		t.DispatchProfile, t.DispatchProfileTop = profiled.path, profiled.top
	}
	cpuNow, err := processCPU(b.clusters)
	if err != nil {
		return nil, err
	}
	t.CPU = perJob(cpuStart, cpuNow, n)
	fmt.Fprintf(b.cfg.Progress, "%s: all %d Jobs running after %.0f s; to there the manager took %.4f CPU-s per Job (dispatch ceiling %s), its API server %.4f; measuring the manager\n",
		what, n, t.AllRunningSeconds, t.CPU[managerProcess], perSecond(t.CPU[managerProcess]), t.CPU[apiServerProcess])
	if t.RSS, err = rssBytes(b.env.ManagerProcess.PID); err != nil {
		return nil, err
	}
	heap, err := b.liveHeapBytes(ctx)
	if err != nil {
		return nil, err
	}
	if t.HeapProfile, t.HeapTop, err = b.heapProfile(ctx, "tracked-"+tag); err != nil {
		return nil, err
	}
	t.RSSPerJob, t.LiveHeapPerJob = float64(t.RSS-rssBefore)/float64(n), float64(heap-heapBefore)/float64(n)
	// Said now too: a long run's last phase may not finish.
	fmt.Fprintf(b.cfg.Progress, "%s: with all %d tracked, manager RSS %.0f MiB (%.1f KiB per Job), live heap %.1f KiB per Job (profile %s)\n",
		what, n, float64(t.RSS)/(1<<20), t.RSSPerJob/1024, t.LiveHeapPerJob/1024, t.HeapProfile)
	release := func() error {
		simulator, err := b.env.Workers[0].Component(simulatorComponent)
		if err != nil {
			return err
		}
		if err := syscall.Kill(simulator.PID, syscall.SIGUSR1); err != nil {
			return fmt.Errorf("releasing the held Jobs: %w", err)
		}
		return nil
	}
	if sample := b.cfg.Simulated.ReleaseSample; sample > 0 {
		// The simulator's first release is the sample; its next, below,
		// the rest.
		if t.Sample, err = b.releaseSample(ctx, o, min(sample, n), what, release); err != nil {
			return nil, err
		}
	}
	if !b.cfg.Failover {
		return t, release()
	}
	fmt.Fprintf(b.cfg.Progress, "%s: killing the leader, releasing the Jobs\n", what)
	if t.killed, err = b.killLeader(ctx, release); err != nil {
		return nil, err
	}
	return t, nil
}

// Sample is the status-copy lag of a sample of the held Jobs, released
// while the others were still tracked.
type Sample struct {
	Jobs int         `json:"jobs"`
	Lag  Percentiles `json:"lag"`
}

// releaseSample releases the simulator's sample and waits until each of
// its Jobs is seen Complete on the manager: no other is released, so the
// Jobs Complete then are the sample.
func (b *bencher) releaseSample(ctx context.Context, o *observer, sample int, what string, release func() error) (*Sample, error) {
	released := time.Now()
	if err := release(); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.cfg.Progress, "%s: released a sample of %d Jobs\n", what, sample)
	if err := waitComplete(ctx, o, sample, timeout(sample), what+", the sample", b.cfg.Progress); err != nil {
		return nil, err
	}
	s := &Sample{Jobs: sample, Lag: o.lagSince(released)}
	fmt.Fprintf(b.cfg.Progress, "%s: the sample's status-copy lag p50 / p95 / p99 / max %s\n", what, fourPercentiles(s.Lag))
	return s, nil
}

// perSecondRate says a rate a second, "unbounded" for 0.
func perSecondRate(perSecond float64) string {
	if perSecond <= 0 {
		return "unbounded"
	}
	return strconv.FormatFloat(perSecond, 'g', -1, 64)
}
