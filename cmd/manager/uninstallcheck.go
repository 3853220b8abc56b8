package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobferryv1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/uninstall"
)

// uninstallCheckCommand is the manager chart's pre-delete hook (`manager
// uninstall-check`, package manager/uninstall): it refuses the uninstall
// while anything would be stranded by it.
const uninstallCheckCommand = "uninstall-check"

// uninstallCheck runs the check with the pod's in-cluster identity (the
// check's own ServiceAccount) and returns the exit code.
func uninstallCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(uninstallCheckCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r uninstall.Release
	fs.StringVar(&r.Name, "release", "jobferry-manager", "the helm release being uninstalled")
	fs.StringVar(&r.Namespace, "namespace", "jobferry-system", "its namespace")
	fs.IntVar(&r.Revision, "revision", 1, "its current revision")
	selector := fs.String("dispatch-namespace-selector", jobferryv1alpha1.DispatchNamespaceLabel+"="+jobferryv1alpha1.DispatchEnabled, "the manager's --dispatch-namespace-selector")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dispatch, err := labels.Parse(*selector)
	if err != nil {
		fmt.Fprintf(stderr, "uninstall-check: --dispatch-namespace-selector %q: %v\n", *selector, err)
		return 2
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(stderr, "uninstall-check:", err)
		return 2
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "uninstall-check:", err)
		return 2
	}
	c, err := client.New(cfg, client.Options{Scheme: jobferryv1alpha1.NewScheme()})
	if err != nil {
		fmt.Fprintln(stderr, "uninstall-check:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	found, err := uninstall.Check(ctx, kube, c, dispatch)
	if err != nil {
		fmt.Fprintln(stderr, "uninstall-check:", err)
		return 2
	}
	if !found.Clear() {
		fmt.Fprint(stderr, uninstall.Refusal(found, r, dispatch))
		return 1
	}
	fmt.Fprintln(stdout, "uninstall-check: no worker registered, no namespace opted in, no unfinished Job managed by jobferry: uninstalling strands nothing")
	return 0
}
