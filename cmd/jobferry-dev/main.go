// Command jobferry-dev runs jobferry's local development environment: a
// manager cluster and worker clusters as local processes (up, down,
// status) and the demo. It serves development only and may use the test
// harness (devtools/localcluster); what users run against real clusters is the
// kubectl plugin, cmd/kubectl-jobferry, which must not.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

func main() {
	root := &cobra.Command{
		Use:           "jobferry-dev",
		Short:         "Local jobferry clusters for development: a manager and workers as local processes, and the demo",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommands()...)
	root.AddCommand(newDemoCommand())
	root.AddCommand(newBenchCommand(), newSimulateCommand(), newChaosCommand())
	if err := root.Execute(); err != nil {
		// A start that failed because Ctrl-C is stopping its clusters:
		// the interrupt's handler finishes the clean-up and exits.
		localcluster.AwaitInterrupt()
		fmt.Fprintln(os.Stderr, "jobferry-dev:", err)
		os.Exit(1)
	}
}
