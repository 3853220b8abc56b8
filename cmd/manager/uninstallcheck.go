package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/jobferry/jobferry/internal/managedjobs"
)

// uninstallCheckCommand is the manager chart's pre-delete hook (`manager
// uninstall-check`): it refuses the uninstall while any Job jobferry
// manages is unfinished, since nothing else would ever run it.
const uninstallCheckCommand = "uninstall-check"

// uninstallCheckShown bounds the Jobs the refusal names.
const uninstallCheckShown = 20

// uninstallCheck runs the check with the pod's in-cluster identity (the
// manager's ServiceAccount, which lists Jobs) and returns the exit code.
func uninstallCheck(stdout, stderr io.Writer) int {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unfinished, _, err := managedjobs.List(ctx, kube, "")
	if err != nil {
		fmt.Fprintln(stderr, "uninstall-check:", err)
		return 2
	}
	if len(unfinished) == 0 {
		fmt.Fprintln(stdout, "uninstall-check: no unfinished Job is managed by jobferry; uninstalling strands none")
		return 0
	}
	fmt.Fprint(stderr, refusal(unfinished))
	return 1
}

// refusal says why the uninstall is refused and what to do.
func refusal(unfinished []managedjobs.Job) string {
	return fmt.Sprintf("uninstall refused: %d Jobs managed by jobferry are unfinished, and once the manager is gone nothing runs them (their spec.managedBy is immutable):\n%s"+
		"Wait for them to finish or delete them, and remove each worker first (kubectl jobferry remove WORKER), then uninstall again.\n"+
		"To uninstall anyway, leaving them as they are: helm uninstall --no-hooks, or set uninstallCheck.enabled=false.\n",
		len(unfinished), managedjobs.Lines(unfinished, uninstallCheckShown))
}
