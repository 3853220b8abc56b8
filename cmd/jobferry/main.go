// Command jobferry is the jobferry CLI (usable as a kubectl plugin under the
// name kubectl-jobferry): local development clusters and the demo today;
// status, cordon and kubeconfig minting as they are built.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "jobferry",
		Short:         "jobferry dispatches Kubernetes Jobs from a manager cluster to worker clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand(), newDemoCommand())
	root.AddCommand(newCordonCommands()...)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "jobferry:", err)
		os.Exit(1)
	}
}
