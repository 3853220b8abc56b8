package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobferry/jobferry/devtools/chaos"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

func newChaosCommand() *cobra.Command {
	var o chaos.Options
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run Jobs of every shape through jobferry on fresh local clusters while faults drawn from a seed hit them, record every change, and check the history against jobferry's promises",
		Long: `chaos starts a manager cluster with two manager replicas and --workers
worker clusters (KWOK nodes; a real node each with --real-nodes), sends
--rate Jobs a second for --span (the shapes users send: indexed Jobs with a
failing index and backoffLimitPerIndex, podFailurePolicy, successPolicy,
parallelism changed while running, suspended and resumed, deleted while
running, ttlSecondsAfterFinished, a CronJob's, queued in Kueue with --kueue)
while a nemesis injects faults at random times from its catalogue (the leader
or the standby SIGKILLed, both down, a worker's API server frozen shorter and
longer than the worker-lost timeout, a worker's etcd restarted, the manager
cluster's API server restarted, a worker's credential revoked, the webhooks
unreachable, a worker's namespace deleted, a worker's nodes lost (KWOK's
only), Kueue restarted), every --mean-fault-gap on average, overlapping.

Every change of every manager Job, mirror and pod is recorded from watches;
once the Jobs finished and the namespace was deleted, a checker reads the
history and reports each broken promise with the history of its Job. The
seed fixes the plan (faults and Jobs, their times and targets), not the
processes' interleaving. The record (history.json, facts.json, report.txt)
is kept in --dir; ` + "`jobferry-dev chaos check DIR`" + ` runs the checker over it again.
The exit code is 1 when a promise was broken.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Dir == "" {
				root, err := localcluster.RepoRoot()
				if err != nil {
					return err
				}
				o.Dir = filepath.Join(root, "_output", "chaos", time.Now().UTC().Format("20060102-150405"))
			}
			o.Progress = cmd.ErrOrStderr()
			report, err := chaos.Run(cmd.Context(), o)
			if report != nil {
				fmt.Fprint(cmd.OutOrStdout(), report)
				fmt.Fprintf(cmd.OutOrStdout(), "\nthe run's record: %s\n", o.Dir)
			}
			if err != nil {
				return err
			}
			if !report.Passed() {
				return fmt.Errorf("%d of jobferry's promises broken (seed %d)", len(report.Violations), o.Seed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&o.Seed, "seed", chaos.SeedOfTheDay(time.Now()), "the seed that draws the faults and the Jobs (default: today's date)")
	f.DurationVar(&o.Span, "span", 3*time.Minute, "how long Jobs are sent and faults injected (an hour for a soak)")
	f.Float64Var(&o.Rate, "rate", 1.5, "Jobs sent per second")
	f.DurationVar(&o.MeanFaultGap, "mean-fault-gap", 6*time.Second, "mean time between two faults' starts")
	f.IntVar(&o.Workers, "workers", 3, "worker clusters")
	f.BoolVar(&o.Kueue, "kueue", false, "run Kueue on the manager, queue some Jobs, and restart Kueue among the faults")
	f.BoolVar(&o.RealNodes, "real-nodes", false, "run each worker on a real node (kubelet and containerd, as root; `make nodes`), the Jobs' pods as busybox scripts; on 2 CPUs, --workers=2 --rate=0.5")
	f.StringVar(&o.Dir, "dir", "", "where the environment and the run's record go (default _output/chaos/<time>)")
	f.StringArrayVar(&o.ManagerArgs, "manager-arg", nil, "an extra flag for the manager replicas (repeatable)")
	f.Var(faultKinds{&o.Faults}, "faults", "draw only these kinds of fault (comma-separated, e.g. credential-revoked,worker-frozen-long), to chase one failure")
	cmd.AddCommand(&cobra.Command{
		Use:   "check DIR",
		Short: "Run the checker again over a chaos run's record (its history.json and facts.json)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			violations, observed, err := chaos.CheckRecord(args[0])
			if err != nil {
				return err
			}
			for _, v := range violations {
				fmt.Fprintln(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d violations; %+v\n", len(violations), observed)
			if len(violations) > 0 {
				return fmt.Errorf("%d of jobferry's promises broken", len(violations))
			}
			return nil
		},
	})
	return cmd
}

// faultKinds is --faults: a comma-separated list of fault kinds.
type faultKinds struct{ kinds *[]chaos.FaultKind }

func (f faultKinds) String() string {
	if f.kinds == nil {
		return ""
	}
	var names []string
	for _, k := range *f.kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

func (f faultKinds) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*f.kinds = append(*f.kinds, chaos.FaultKind(name))
		}
	}
	return nil
}

func (faultKinds) Type() string { return "kinds" }
