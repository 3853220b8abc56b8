package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobferry/jobferry/devtools/bench"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/devtools/simworker"
)

func newBenchCommand() *cobra.Command {
	var (
		ns         string
		workers    int
		scale      bool
		splitCPUs  bool
		out        string
		mgrArgs    []string
		mgrEnv     []string
		withKueue  bool
		multiKueue bool
		kueueAlone bool
		kueueQPS   int
		armLimit   time.Duration
		simulated  bool
		interval   time.Duration
		failover   bool
		shift      bool
		keepJobs   bool
		inspect    bool
		load       = bench.InspectionLoad{Tenants: 4, PodsEach: 50, LinesPerSecond: 5, Rounds: 3}
		sim        = bench.Simulation{Nodes: 100, Timing: simworker.DefaultOptions.Timing}
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run N one-pod Jobs directly on the workers, through jobferry and through Kueue and jobferry, in one run on fresh local clusters, and write result.json, report.md and plots",
		Long: `bench starts a manager cluster (with Kueue, unless --kueue=false) and worker
clusters (the manager's processes pinned to one half of the CPUs, the
workers' to the other, unless --split-cpus=false), then for each N runs the
direct arm (N Jobs created on the workers, split evenly), the jobferry arm
(N Jobs created on the manager in an opted-in namespace) and the Kueue arm
(the same, queued in one LocalQueue with quota for all of them), and writes
what it measured into --out. --multikueue (env BENCH_MULTIKUEUE=1) adds the
MultiKueue arm: Kueue on every worker too, and the same Jobs dispatched by
Kueue's MultiKueue (Kueue v0.17, its remote clients at client-go's 5 QPS,
which v0.17 offers no knob to raise). --kueue-alone (env BENCH_KUEUE_ALONE=1)
adds the Kueue arm's baseline: Kueue on every worker admitting the same Jobs,
submitted there, from a ClusterQueue without admission checks; the report
then splits the Kueue arm's manager cluster into what jobferry alone, Kueue
alone and the two together cost. --arm-limit (env BENCH_ARM_LIMIT) bounds
every arm and reports one that runs out as far as it got (direct submission
of 5,000 Jobs onto two workers of two nodes does not finish within the hour).
--scale runs 10,000 Jobs over 10 workers.

--simulated (env BENCH_SIM=1) measures the manager at scale instead: the
workers are API servers only, without nodes or pods, and a simulator moves
their Jobs through their statuses (the report says so); the jobferry arm
only, Kueue off.

--inspection-load (env BENCH_INSPECTION=1) measures what tenants following
logs cost dispatch: the workers are registered with the worker chart's
identity for the manager (API Priority and Fairness applies, as on an
installation), --inspection-tenants tenants each run a Job of
--inspection-pods pods through the jobferry arm, and the jobferry arm runs
again while each follows the logs of all its pods (kubectl jobferry logs
--all-pods -f) while every container prints --inspection-lines-per-second
lines a second, and once more after they stopped: --inspection-rounds
times, quiet and followed arms alternating. The Jobs come one every 200 ms
unless --create-interval says otherwise.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			counts, err := parseCounts(ns)
			if err != nil {
				return err
			}
			if v := os.Getenv("BENCH_WORKERS"); v != "" && !cmd.Flags().Changed("workers") {
				if workers, err = strconv.Atoi(v); err != nil {
					return fmt.Errorf("BENCH_WORKERS=%q is not a number", v)
				}
			}
			if scale {
				counts, workers = []int{10000}, 10
			}
			if v := os.Getenv("BENCH_KUEUE"); v != "" && !cmd.Flags().Changed("kueue") {
				if withKueue, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("BENCH_KUEUE=%q is not true or false", v)
				}
			}
			if v := os.Getenv("BENCH_MULTIKUEUE"); v != "" && !cmd.Flags().Changed("multikueue") {
				if multiKueue, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("BENCH_MULTIKUEUE=%q is not true or false", v)
				}
			}
			if v := os.Getenv("BENCH_KUEUE_ALONE"); v != "" && !cmd.Flags().Changed("kueue-alone") {
				if kueueAlone, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("BENCH_KUEUE_ALONE=%q is not true or false", v)
				}
			}
			if v := os.Getenv("BENCH_KUEUE_QPS"); v != "" && !cmd.Flags().Changed("kueue-client-qps") {
				if kueueQPS, err = strconv.Atoi(v); err != nil {
					return fmt.Errorf("BENCH_KUEUE_QPS=%q is not a number", v)
				}
			}
			if v := os.Getenv("BENCH_ARM_LIMIT"); v != "" && !cmd.Flags().Changed("arm-limit") {
				if armLimit, err = time.ParseDuration(v); err != nil {
					return fmt.Errorf("BENCH_ARM_LIMIT=%q is not a duration such as 15m", v)
				}
			}
			if armLimit < 0 {
				return fmt.Errorf("--arm-limit must not be negative (0: none), got %s", armLimit)
			}
			if kueueQPS < 0 {
				return fmt.Errorf("--kueue-client-qps must not be negative (0: the bench's default of 50, burst 100), got %d", kueueQPS)
			}
			if multiKueue && !withKueue {
				return fmt.Errorf("--multikueue runs Kueue on the manager and the workers: it goes with --kueue")
			}
			if kueueAlone && !withKueue {
				return fmt.Errorf("--kueue-alone is the Kueue arm's baseline: it goes with --kueue")
			}
			if v := os.Getenv("BENCH_SIM"); v != "" && !cmd.Flags().Changed("simulated") {
				if simulated, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("BENCH_SIM=%q is not true or false", v)
				}
			}
			if v := os.Getenv("BENCH_INSPECTION"); v != "" && !cmd.Flags().Changed("inspection-load") {
				if inspect, err = strconv.ParseBool(v); err != nil {
					return fmt.Errorf("BENCH_INSPECTION=%q is not true or false", v)
				}
			}
			var inspection *bench.InspectionLoad
			for _, f := range []string{"inspection-tenants", "inspection-pods", "inspection-lines-per-second", "inspection-rounds"} {
				if cmd.Flags().Changed(f) && !inspect {
					return fmt.Errorf("--%s goes with --inspection-load", f)
				}
			}
			if load.LinesPerSecond < 0 || load.LinesPerSecond > 1000 {
				return fmt.Errorf("--inspection-lines-per-second must be between 0 and 1000, got %g", load.LinesPerSecond)
			}
			if load.Rounds < 1 || load.Rounds > 10 {
				return fmt.Errorf("--inspection-rounds must be between 1 and 10, got %d", load.Rounds)
			}
			if inspect {
				inspection = &load
				if !cmd.Flags().Changed("create-interval") {
					// Latency, not throughput: Jobs created all at
					// once would measure the queue they make. One every
					// 100 ms kept the workers' one CPU (two control
					// planes and KWOK) busy in the quiet arms already
					// (0.13 CPU-s a Job), so a followed arm measured the
					// cliff of a saturated CPU, not what following costs.
					interval = 200 * time.Millisecond
				}
			}
			if workers < 1 {
				return fmt.Errorf("--workers must be at least 1, got %d", workers)
			}
			for _, kv := range mgrEnv {
				if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
					return fmt.Errorf("--manager-env %q is not NAME=value", kv)
				}
			}
			var simulation *bench.Simulation
			if simulated {
				if sim.Binary, err = os.Executable(); err != nil {
					return fmt.Errorf("finding jobferry-dev, which runs the simulator: %w", err)
				}
				if !cmd.Flags().Changed("kueue") {
					withKueue = false
				}
				simulation = &sim
			}
			if out == "" {
				root, err := localcluster.RepoRoot()
				if err != nil {
					return err
				}
				out = filepath.Join(root, "_output", "bench", time.Now().UTC().Format("20060102-150405"))
			}
			clusters := filepath.Join(out, "clusters")
			res, err := bench.RunBench(cmd.Context(), bench.Config{
				Ns: counts, Workers: workers, SplitCPUs: splitCPUs, Out: out, ClusterDir: clusters, ManagerArgs: mgrArgs, ManagerEnv: mgrEnv, Kueue: withKueue, MultiKueue: multiKueue, KueueAlone: kueueAlone, KueueClientQPS: kueueQPS, ArmLimit: armLimit, Simulated: simulation, Failover: failover, Shift: shift, KeepJobs: keepJobs, InspectionLoad: inspection, CreateInterval: interval, Progress: cmd.ErrOrStderr(),
			})
			if err != nil {
				return fmt.Errorf("%w (cluster logs in %s)", err, clusters)
			}
			// The clusters' etcd data is large and of no use once measured;
			// their logs are small and explain what was (a takeover's
			// timeline, say).
			if err := keepLogs(clusters, filepath.Join(out, "logs")); err != nil {
				return err
			}
			if err := os.RemoveAll(clusters); err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), bench.Markdown(res))
			fmt.Fprintf(cmd.OutOrStdout(), "\nresult.json, report.md, plots and the clusters' logs in %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&ns, "n", envOr("BENCH_N", "1000"), "comma-separated Job counts, one run of both arms each (env BENCH_N)")
	cmd.Flags().IntVar(&workers, "workers", 2, "worker clusters (env BENCH_WORKERS)")
	cmd.Flags().BoolVar(&scale, "scale", os.Getenv("BENCH_SCALE") != "", "10,000 Jobs over 10 workers, overriding --n and --workers (env BENCH_SCALE)")
	cmd.Flags().BoolVar(&splitCPUs, "split-cpus", true, "pin the manager cluster and the workers to different halves of the CPUs")
	cmd.Flags().StringVar(&out, "out", "", "output directory (default _output/bench/<UTC time>)")
	cmd.Flags().BoolVar(&withKueue, "kueue", true, "run Kueue (bin/kueue) on the manager cluster and the Kueue arm (env BENCH_KUEUE)")
	cmd.Flags().BoolVar(&multiKueue, "multikueue", false, "run Kueue on every worker too and the MultiKueue arm: the same Jobs dispatched by Kueue's MultiKueue (env BENCH_MULTIKUEUE)")
	cmd.Flags().BoolVar(&kueueAlone, "kueue-alone", false, "run Kueue on every worker too and the Kueue-alone arm, the Kueue arm's baseline: the same Jobs admitted by the workers' Kueue without admission checks (env BENCH_KUEUE_ALONE)")
	cmd.Flags().IntVar(&kueueQPS, "kueue-client-qps", 0, "every Kueue's clientConnection QPS and burst to its own cluster (0: 50 and 100; env BENCH_KUEUE_QPS)")
	cmd.Flags().DurationVar(&armLimit, "arm-limit", 0, "how long every arm may take; an arm that runs out is reported as far as it got instead of failing the run (0: none, a stuck arm fails it at 2 Jobs/s; env BENCH_ARM_LIMIT)")
	cmd.Flags().DurationVar(&interval, "create-interval", 0, "create the Jobs one at a time this far apart (a quiet manager) instead of all at once")
	cmd.Flags().BoolVar(&simulated, "simulated", false, "simulated workers (API servers only; the manager measured at scale; env BENCH_SIM)")
	cmd.Flags().IntVar(&sim.Nodes, "sim-nodes", sim.Nodes, "nodes each simulated worker pretends to have (16 CPUs, 110 pods each)")
	cmd.Flags().DurationVar(&sim.Timing.Start, "sim-start", sim.Timing.Start, "from a mirror's creation to its simulated pod running")
	cmd.Flags().DurationVar(&sim.Timing.RunFor, "sim-run-for", sim.Timing.RunFor, "how long a simulated pod runs")
	cmd.Flags().IntVar(&sim.ReleaseSample, "sim-release-sample", 0, "with --sim-hold, release only this many Jobs first (at --sim-release-rate) and report their status-copy lag while the rest are still tracked, then the rest at once (with --sim-failover the sample before the leader's kill, the rest after it)")
	cmd.Flags().Float64Var(&sim.ReleaseRate, "sim-release-rate", 0, "with --sim-hold, release the Jobs this many a second (Complete at a steady rate while the rest are still tracked) instead of all at once")
	cmd.Flags().BoolVar(&failover, "sim-failover", false, "with --sim-hold and one N: run two manager replicas and SIGKILL the leader once every Job is tracked; report the takeover and the mirrors per Job")
	cmd.Flags().BoolVar(&shift, "sim-shift", false, "with --simulated, one N and three workers or more: fill the first worker (a Job of its own taking every pod slot) once a third of the Jobs are created and SIGKILL the second's API server at half (back 15 s later); report how soon placements left them")
	cmd.Flags().BoolVar(&keepJobs, "sim-keep-jobs", false, "with --simulated and one N: leave the Jobs once measured, torn down with the clusters (deleting 100,000 one by one takes half an hour; writes and CPU then leave it out)")
	cmd.Flags().BoolVar(&sim.Timing.Hold, "sim-hold", os.Getenv("BENCH_SIM_HOLD") != "", "hold every Job running until all N are, measure the manager tracking them at once, then release them (env BENCH_SIM_HOLD)")
	cmd.Flags().BoolVar(&inspect, "inspection-load", false, "run the jobferry arm again while tenants follow logs, the workers joined with the worker chart's identity (env BENCH_INSPECTION)")
	cmd.Flags().IntVar(&load.Tenants, "inspection-tenants", load.Tenants, "with --inspection-load, how many tenants follow logs")
	cmd.Flags().Int32Var(&load.PodsEach, "inspection-pods", load.PodsEach, "with --inspection-load, the pods of each tenant's Job, whose logs it follows")
	cmd.Flags().IntVar(&load.Rounds, "inspection-rounds", load.Rounds, "with --inspection-load, how many followed arms run, each followed by a quiet one")
	cmd.Flags().Float64Var(&load.LinesPerSecond, "inspection-lines-per-second", load.LinesPerSecond, "with --inspection-load, the lines every container on the workers prints a second while the tenants follow (0: the streams idle once the first lines are out)")
	cmd.Flags().StringArrayVar(&mgrArgs, "manager-arg", nil, "an extra flag for the jobferry manager, such as --concurrent-job-syncs=32 (repeatable; the report names them)")
	cmd.Flags().StringArrayVar(&mgrEnv, "manager-env", nil, "an extra NAME=value in the jobferry manager's environment, such as GOMEMLIMIT=900MiB (repeatable; the report names them)")
	return cmd
}

// parseCounts reads a list such as "1000,5000".
func parseCounts(list string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--n: %q is not a positive Job count", f)
		}
		counts = append(counts, n)
	}
	return slices.Clip(counts), nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// keepLogs moves each cluster's log directory (clusters/NAME/logs) to
// dest/NAME.
func keepLogs(clusters, dest string) error {
	entries, err := os.ReadDir(clusters)
	if err != nil {
		return fmt.Errorf("keeping the clusters' logs: %w", err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("keeping the clusters' logs: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			// The clusters' CA, say.
			continue
		}
		logs := filepath.Join(clusters, e.Name(), "logs")
		if _, err := os.Stat(logs); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fmt.Errorf("keeping the clusters' logs: %w", err)
		}
		if err := os.Rename(logs, filepath.Join(dest, e.Name())); err != nil {
			return fmt.Errorf("keeping the clusters' logs: %w", err)
		}
	}
	return nil
}
