package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// newCordonCommands returns `cordon` and `uncordon`, which set
// WorkerCluster.spec.cordoned: no new placements on the worker while cordoned;
// Jobs already there keep running.
func newCordonCommands(o *options) []*cobra.Command {
	build := func(use string, cordoned bool, short string) *cobra.Command {
		cmd := &cobra.Command{
			Use:               use + " WORKER",
			ValidArgsFunction: completeWorkers(o),
			Short:             short,
			Args:              cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				m, err := o.manager()
				if err != nil {
					return err
				}
				changed, err := setCordoned(cmd.Context(), m.client, args[0], cordoned)
				if err != nil {
					return err
				}
				state := map[bool]string{true: "cordoned", false: "uncordoned"}[cordoned]
				if !changed {
					fmt.Fprintf(cmd.OutOrStdout(), "workercluster/%s already %s\n", args[0], state)
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "workercluster/%s %s\n", args[0], state)
				return nil
			},
		}
		return cmd
	}
	return []*cobra.Command{
		build("cordon", true, "Stop placing new Jobs on a worker; Jobs already there continue"),
		build("uncordon", false, "Allow placements on a worker again"),
	}
}

// setCordoned patches spec.cordoned and reports whether it changed.
func setCordoned(ctx context.Context, c client.Client, name string, cordoned bool) (bool, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, wc); err != nil {
		return false, fmt.Errorf("reading WorkerCluster %s: %w", name, err)
	}
	if wc.Spec.Cordoned == cordoned {
		return false, nil
	}
	patch := client.MergeFrom(wc.DeepCopy())
	wc.Spec.Cordoned = cordoned
	if err := c.Patch(ctx, wc, patch); err != nil {
		return false, fmt.Errorf("setting cordoned=%t on WorkerCluster %s: %w", cordoned, name, err)
	}
	return true, nil
}
