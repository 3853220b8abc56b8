package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Shell completion of the names commands take: `kubectl-jobferry
// completion bash|zsh|fish|powershell` (cobra's) prints the script, and
// kubectl completes a plugin through an executable kubectl_complete-jobferry
// on the PATH that runs `kubectl-jobferry __complete "$@"`. Names are read
// from the manager cluster with the user's kubeconfig; a read that fails
// completes nothing rather than print an error into the shell.

// completeWorkers completes the first argument with the WorkerClusters'
// names.
func completeWorkers(o *options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		m, err := o.manager()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list v1alpha1.WorkerClusterList
		if err := m.client.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, wc := range list.Items {
			if strings.HasPrefix(wc.Name, toComplete) {
				names = append(names, wc.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeJobs completes Job names of the namespace (-n, or the context's);
// many is whether the command takes more than one.
func completeJobs(o *options, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		m, err := o.manager()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// Names only, a page of them: completion must answer at once.
		list, err := m.kube.BatchV1().Jobs(ns).List(cmd.Context(), metav1.ListOptions{Limit: 500})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, j := range list.Items {
			if strings.HasPrefix(j.Name, toComplete) && !slices.Contains(args, j.Name) {
				names = append(names, j.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
