package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

func defaultDevDir() string {
	if root, err := localcluster.RepoRoot(); err == nil {
		return filepath.Join(root, ".local", "dev")
	}
	return filepath.Join(".local", "dev")
}

// startDev starts the development environment in dir, refusing to start over
// a running one.
func startDev(ctx context.Context, dir string, workers int, withKueue, realNodes bool, out io.Writer) (*devenv.Env, error) {
	if workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1, got %d", workers)
	}
	running, err := localcluster.LoadEnvironment(dir)
	if err != nil {
		return nil, err
	}
	for _, c := range running {
		if c.Running() {
			return nil, fmt.Errorf("cluster %s of a previous environment is still running in %s: run `jobferry-dev down --dir %s` (or `make dev-down`) first", c.Name, dir, dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	opts := devenv.Options{Dir: dir, Workers: devenv.DevWorkers(workers), JobControllers: devenv.DevJobControllers, Detached: true, Progress: out}
	if realNodes {
		fmt.Fprintf(out, "starting a manager and %d worker(s), each with a real node, in %s (about 30 s)\n", workers, dir)
		opts.Workers = devenv.RealNodeWorkers(workers)
	} else {
		fmt.Fprintf(out, "starting a manager and %d worker(s) in %s (about 15 s)\n", workers, dir)
	}
	if withKueue {
		opts.Kueue = &localcluster.KueueOptions{}
	}
	return devenv.Start(ctx, opts)
}

// kubectlHint is a command line a reader can paste to look at a cluster.
// Inside the checkout the paths are relative to its root, as the README's
// commands are run from there; elsewhere they are absolute.
func kubectlHint(dir, cluster, args string) string {
	return binaryHint("kubectl", dir, cluster, args)
}

// pluginHint is the same for kubectl-jobferry (`kubectl jobferry` once on
// the PATH), which make build puts next to kubectl.
func pluginHint(dir, args string) string {
	return binaryHint("kubectl-jobferry", dir, "manager", args)
}

func binaryHint(binary, dir, cluster, args string) string {
	bin := "bin"
	root, err := localcluster.RepoRoot()
	if err == nil {
		if rel, err := filepath.Rel(root, dir); err == nil {
			dir = rel
		}
	} else if binDir, err := localcluster.BinDir(); err == nil {
		bin = binDir
	}
	return fmt.Sprintf("%s/%s --kubeconfig %s/%s/kubeconfig %s", bin, binary, dir, cluster, args)
}

// newDevCommands returns up, down and status, which share --dir.
func newDevCommands() []*cobra.Command {
	var dir string
	var workers int
	var withKueue, realNodes bool
	var release string
	dirFlag := func(cmd *cobra.Command) *cobra.Command {
		cmd.Flags().StringVar(&dir, "dir", defaultDevDir(), "directory holding the clusters' state, kubeconfigs and logs")
		return cmd
	}

	up := &cobra.Command{
		Use:   "up",
		Short: "Start a manager cluster and N worker clusters; they keep running until `jobferry-dev down`",
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if release != "" {
				return upFromRelease(cmd.Context(), dir, workers, release, withKueue, realNodes, out)
			}
			env, err := startDev(cmd.Context(), dir, workers, withKueue, realNodes, out)
			if err != nil {
				return err
			}
			env.Release()
			fmt.Fprintln(out, "\nkubeconfigs:")
			for _, c := range env.Clusters() {
				fmt.Fprintf(out, "  %-10s %s\n", c.Name, c.KubeconfigPath)
			}
			fmt.Fprintf(out, "\ntry:   %s\nstop:  jobferry-dev down (or make dev-down)\n", kubectlHint(dir, "manager", "get workerclusters"))
			return nil
		},
	}
	up.Flags().IntVar(&workers, "workers", 2, "number of worker clusters")
	up.Flags().BoolVar(&realNodes, "real-nodes", false, "give each worker a real node (kubelet, kube-proxy, containerd; root and `make nodes`) instead of KWOK's fake ones: its pods run real containers ("+localcluster.BusyboxImage+" is there)")
	up.Flags().StringVar(&release, "release", "", "with --real-nodes: install this release (a directory `make release-e2e` or `make release` wrote, e.g. _output/release-e2e) as pods from a local registry, as a platform team installs it, instead of running jobferry's binaries as processes; every cluster gets a real node")
	up.Flags().BoolVar(&withKueue, "kueue", false, "also run Kueue (bin/kueue, the version hack/tools/kueue pins) on the manager cluster, with its CRDs, and the manager with --kueue")

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the local environment, by PID",
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopped, err := localcluster.StopEnvironment(dir)
			if err != nil {
				return err
			}
			if stopped == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no local environment running in %s\n", dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped %d cluster(s) in %s\n", stopped, dir)
			return nil
		},
	}

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the clusters of the local environment and whether their processes run",
		RunE: func(cmd *cobra.Command, _ []string) error {
			clusters, err := localcluster.LoadEnvironment(dir)
			if err != nil {
				return err
			}
			if len(clusters) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no local environment in %s\n", dir)
			}
			for _, c := range clusters {
				var procs []string
				for _, p := range c.Processes {
					state := "running"
					if p.Exited() {
						state = "stopped"
					}
					procs = append(procs, fmt.Sprintf("%s(%d %s)", p.Name, p.PID, state))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%-10s %s\n           %s\n", c.Name, c.KubeconfigPath, strings.Join(procs, " "))
			}
			return nil
		},
	}
	return []*cobra.Command{dirFlag(up), dirFlag(down), dirFlag(status)}
}

// upFromRelease is `up --real-nodes --release DIR`: the release published
// to a local registry, its charts installed as pods, the workers joined
// with its plugin.
func upFromRelease(ctx context.Context, dir string, workers int, releaseDir string, withKueue, realNodes bool, out io.Writer) error {
	switch {
	case !realNodes:
		return fmt.Errorf("--release installs the charts as pods, which run on real nodes only: add --real-nodes")
	case withKueue:
		return fmt.Errorf("--release does not install Kueue: leave out --kueue")
	case workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", workers)
	}
	release, err := devenv.FindRelease(releaseDir)
	if err != nil {
		return err
	}
	running, err := localcluster.LoadEnvironment(dir)
	if err != nil {
		return err
	}
	for _, c := range running {
		if c.Running() {
			return fmt.Errorf("cluster %s of a previous environment is still running in %s: run `jobferry-dev down --dir %s` (or `make dev-down`) first", c.Name, dir, dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "starting a manager and %d worker(s), each with a real node, and a registry in %s; then release %s from %s, installed as pods (about 2 minutes)\n", workers, dir, release.Version, release.Dir)
	env, inst, err := devenv.StartRelease(ctx, dir, workers, release, true, out)
	if err != nil {
		return err
	}
	env.Release()
	fmt.Fprintf(out, "\nthe release's charts run as pods, their images pulled from %s\n", inst.Registry)
	fmt.Fprintf(out, "kubeconfig (a context per cluster): %s\nplugin: %s\n", inst.Kubeconfig, inst.Plugin)
	fmt.Fprintf(out, "\ntry:   %s --kubeconfig %s status\nstop:  jobferry-dev down (or make dev-down)\n", inst.Plugin, inst.Kubeconfig)
	return nil
}
