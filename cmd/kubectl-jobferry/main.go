// Command kubectl-jobferry is jobferry's kubectl plugin (`kubectl jobferry`
// once on PATH): it joins worker clusters to a manager with short-lived
// credentials, shows the state of the workers and where every Job runs,
// describes a Job across both clusters and reads its pods' logs on the
// worker, and cordons workers. It talks to the manager cluster with the
// usual kubectl flags; describe and logs read the worker side through the
// manager's inspection API (inspection.jobferry.dev) with the user's own
// rights on the manager cluster, so a user needs no worker access and no
// worker credential. Only join reaches a worker, with the kubeconfig of the
// administrator who runs it.
//
// It must not link the controllers (manager/) or the test harness (e2e/):
// deps_test.go fails when it does.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := newRootCommand(streams).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// options are what every command shares: the manager cluster's kubectl
// flags, jobferry's namespace there, and where to print.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	// systemNamespace holds the workers' kubeconfig Secrets and the
	// manager's leader election Lease.
	systemNamespace string
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-jobferry",
		Short: "Join worker clusters to a jobferry manager, and see where every Job runs",
		Long: `kubectl jobferry works against the jobferry manager cluster (the usual
--kubeconfig, --context and -n flags). describe and logs see a Job's worker
side through the manager (inspection.jobferry.dev), with your own rights on
the manager cluster: no worker access or credential is needed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl jobferry"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.systemNamespace, "jobferry-namespace", "jobferry-system", "namespace of the jobferry manager in the manager cluster (the workers' kubeconfig Secrets, the leader Lease)")
	root.AddCommand(newJoinCommand(o), newStatusCommand(o), newGetCommand(o), newDescribeCommand(o), newLogsCommand(o))
	root.AddCommand(newCordonCommands(o)...)
	root.AddCommand(newRemoveCommand(o), newVersionCommand(o), newExplainCommand(o))
	return root
}
