package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobferry/jobferry/devtools/bench"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/devtools/simworker"
)

// newSimulateCommand runs the simulator of the bench's simulated workers as
// a process of its own, which the bench pins to the workers' CPUs.
func newSimulateCommand() *cobra.Command {
	var (
		workers []string
		nodes   int
		opts    = simworker.DefaultOptions
	)
	cmd := &cobra.Command{
		Use:    "simulate-workers",
		Short:  "Simulate worker clusters that are API servers only: move their Jobs through their statuses and publish their capacity (used by bench --simulated)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(workers) == 0 {
				return fmt.Errorf("--worker NAME=KUBECONFIG is required")
			}
			var targets []simworker.Target
			for _, w := range workers {
				name, path, ok := strings.Cut(w, "=")
				if !ok || name == "" || path == "" {
					return fmt.Errorf("--worker %q: want NAME=KUBECONFIG", w)
				}
				cfg, err := clientcmd.BuildConfigFromFlags("", path)
				if err != nil {
					return fmt.Errorf("--worker %s: %w", name, err)
				}
				targets = append(targets, simworker.Target{Name: name, Config: cfg, Pools: []localcluster.Pool{bench.SimulatedPool(nodes)}})
			}
			opts.Log = cmd.ErrOrStderr()
			if opts.Timing.Hold {
				// Each SIGUSR1 releases the Jobs held then (the bench sends
				// it once it has measured every Job of a run tracked at once).
				signals := make(chan os.Signal, 1)
				signal.Notify(signals, syscall.SIGUSR1)
				release := make(chan struct{})
				go func() {
					for range signals {
						fmt.Fprintln(cmd.ErrOrStderr(), "releasing the held Jobs")
						release <- struct{}{}
					}
				}()
				opts.Release = release
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "simulating %d workers of %d nodes: pods start %s after their Job, run %s\n", len(targets), nodes, opts.Timing.Start, opts.Timing.RunFor)
			return simworker.Run(cmd.Context(), targets, opts)
		},
	}
	cmd.Flags().StringArrayVar(&workers, "worker", nil, "a simulated worker: NAME=KUBECONFIG (repeatable)")
	cmd.Flags().IntVar(&nodes, "nodes", 100, "nodes each worker pretends to have (16 CPUs, 110 pods each)")
	cmd.Flags().DurationVar(&opts.Timing.Start, "start", opts.Timing.Start, "from a Job's creation to its pods running")
	cmd.Flags().DurationVar(&opts.Timing.RunFor, "run-for", opts.Timing.RunFor, "how long pods run, unless the template says ("+simworker.RunForAnnotation+")")
	cmd.Flags().DurationVar(&opts.Publish, "publish", opts.Publish, "how often a changed capacity summary is written")
	cmd.Flags().BoolVar(&opts.Timing.Hold, "hold", false, "keep running Jobs running until SIGUSR1")
	cmd.Flags().Float64Var(&opts.ReleaseRate, "release-rate", 0, "Jobs a second a SIGUSR1 releases, over all workers (0: all at once)")
	cmd.Flags().IntVar(&opts.ReleaseSample, "release-sample", 0, "the first SIGUSR1 releases only this many Jobs over all workers, the next the rest at once (0: every SIGUSR1 releases all)")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "status writes in flight per worker")
	return cmd
}
