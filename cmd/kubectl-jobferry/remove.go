package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/managedjobs"
)

// removeOptions are the flags of `kubectl jobferry remove`.
type removeOptions struct {
	dryRun  bool
	timeout time.Duration
	// poll is how often the wait reads the Jobs again.
	poll time.Duration
}

// removeShown bounds the Jobs a message names.
const removeShown = 20

// removeSettle is how many reads in a row must find no unfinished Job on
// the worker once the manager has seen the cordon: a placement the manager
// decided just before may still be being written.
const removeSettle = 2

func newRemoveCommand(o *options) *cobra.Command {
	r := &removeOptions{poll: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "remove WORKER",
		Short: "Remove a worker: cordon it, wait for its Jobs, delete its WorkerCluster and kubeconfig Secret",
		Long: `remove takes a worker out of the manager for good:
  1. cordons it (no new Job is placed there);
  2. waits, up to --timeout, until no Job placed there is unfinished (a Job
     cannot be moved while its mirror may run there: wait for it, or delete
     it); on timeout it stops, the worker stays cordoned and registered;
  3. deletes its WorkerCluster and its kubeconfig Secret;
  4. prints what is left on the worker: the mirrors of finished Jobs and the
     namespaces jobferry made there, and the worker chart's helm uninstall.
--dry-run prints what it would do, changing nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd.Context(), o, cmd.OutOrStdout(), args[0])
		},
	}
	f := cmd.Flags()
	f.BoolVar(&r.dryRun, "dry-run", false, "print what would be done, changing nothing")
	f.DurationVar(&r.timeout, "timeout", 10*time.Minute, "how long to wait for the Jobs placed on the worker to finish")
	return cmd
}

func (r *removeOptions) run(ctx context.Context, o *options, out io.Writer, worker string) error {
	m, err := o.manager()
	if err != nil {
		return err
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := m.client.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("there is no WorkerCluster %s on the manager cluster (kubectl get workerclusters lists them)", worker)
		}
		return fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	unfinished, finished, err := managedjobs.List(ctx, m.kube, worker)
	if err != nil {
		return err
	}
	id, err := readManagerID(ctx, m, o.systemNamespace)
	if err != nil {
		return err
	}
	left := leftOnWorker{worker: worker, managerID: id.id, finished: finished}
	secret := wc.Spec.KubeConfig.SecretRef.Name
	if r.dryRun {
		fmt.Fprint(out, removalPlan(worker, wc.Spec.Cordoned, unfinished, o.systemNamespace, secret, left))
		return nil
	}

	if _, err := setCordoned(ctx, m.client, worker, true); err != nil {
		return err
	}
	fmt.Fprintf(out, "workercluster/%s cordoned: no new Job is placed there\n", worker)
	if err := r.waitForJobs(ctx, m, out, worker); err != nil {
		return err
	}
	if err := m.client.Delete(ctx, wc, client.Preconditions{UID: &wc.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting WorkerCluster %s: %w", worker, err)
	}
	fmt.Fprintf(out, "workercluster/%s deleted\n", worker)
	if secret != "" {
		s := &corev1.Secret{}
		s.Namespace, s.Name = o.systemNamespace, secret
		switch err := m.client.Delete(ctx, s); {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "secret/%s was already gone from %s\n", secret, o.systemNamespace)
		case err != nil:
			return fmt.Errorf("deleting the kubeconfig Secret %s/%s of worker %s (its WorkerCluster is deleted): %w", o.systemNamespace, secret, worker, err)
		default:
			fmt.Fprintf(out, "secret/%s deleted from %s\n", secret, o.systemNamespace)
		}
	}
	// Jobs that finished while it waited keep their mirrors there too.
	if _, left.finished, err = managedjobs.List(ctx, m.kube, worker); err != nil {
		return err
	}
	fmt.Fprint(out, left.String())
	return nil
}

// waitForJobs waits until the manager has seen the cordon and no Job placed
// on the worker is unfinished, saying what it waits for.
func (r *removeOptions) waitForJobs(ctx context.Context, m *managerClients, out io.Writer, worker string) error {
	var (
		unfinished []managedjobs.Job
		seen       bool
		zeros      int
		shown      = -1
	)
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := m.client.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
			return false, fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
		}
		seen = cordonSeen(wc)
		var err error
		if unfinished, _, err = managedjobs.List(ctx, m.kube, worker); err != nil {
			return false, err
		}
		if len(unfinished) != shown && len(unfinished) > 0 {
			fmt.Fprintf(out, "waiting for %d Jobs placed on %s to finish:\n%s", len(unfinished), worker, managedjobs.Lines(unfinished, removeShown))
			shown = len(unfinished)
		}
		if !seen || len(unfinished) > 0 {
			zeros = 0
			return false, nil
		}
		zeros++
		return zeros >= removeSettle, nil
	})
	switch {
	case err == nil:
		return nil
	case !wait.Interrupted(err):
		return err
	case !seen:
		return fmt.Errorf("after %s the manager has not yet seen that %s is cordoned (its conditions' observedGeneration is older than the WorkerCluster's): is the manager running? Nothing was deleted; run remove again", r.timeout, worker)
	default:
		return fmt.Errorf("after %s, %d Jobs placed on %s are still unfinished:\n%sNothing was deleted; %s stays cordoned. Wait longer (--timeout) or delete those Jobs, then run remove again; `kubectl jobferry uncordon %s` takes it back into use",
			r.timeout, len(unfinished), worker, managedjobs.Lines(unfinished, removeShown), worker, worker)
	}
}

// cordonSeen reports whether the manager has judged the WorkerCluster as it
// is now (cordoned): its Connected condition is of this generation.
func cordonSeen(wc *v1alpha1.WorkerCluster) bool {
	c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected)
	return wc.Spec.Cordoned && c != nil && c.ObservedGeneration >= wc.Generation
}

// removalPlan is what --dry-run prints.
func removalPlan(worker string, cordoned bool, unfinished []managedjobs.Job, systemNamespace, secret string, left leftOnWorker) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remove %s would (dry run, nothing changed):\n", worker)
	if cordoned {
		fmt.Fprintf(&b, "- keep workercluster/%s cordoned\n", worker)
	} else {
		fmt.Fprintf(&b, "- cordon workercluster/%s: no new Job is placed there\n", worker)
	}
	if len(unfinished) == 0 {
		fmt.Fprintf(&b, "- wait for no Job: none placed on %s is unfinished\n", worker)
	} else {
		fmt.Fprintf(&b, "- wait for the %d unfinished Jobs placed on %s:\n%s", len(unfinished), worker, indent(managedjobs.Lines(unfinished, removeShown)))
	}
	fmt.Fprintf(&b, "- delete workercluster/%s\n", worker)
	if secret != "" {
		fmt.Fprintf(&b, "- delete secret/%s from %s\n", secret, systemNamespace)
	}
	b.WriteString(left.String())
	return b.String()
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix("  "+s, "  "), "\n  ", "\n    ")
}

// leftOnWorker is what a removed worker still holds of this manager, which
// the manager can no longer reach: mirrors of finished Jobs (kept until the
// Job is deleted, unless the manager deletes finished mirrors) and the
// namespaces it made.
type leftOnWorker struct {
	worker, managerID string
	finished          int
}

func (l leftOnWorker) String() string {
	id := l.managerID
	if id == "" {
		id = "<manager-id>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Left on the worker, which this manager no longer reaches (delete them there when no longer needed):\n")
	fmt.Fprintf(&b, "  mirrors of finished Jobs (%d finished Jobs were placed there): kubectl --context %s get jobs -A -l %s=%s\n", l.finished, l.worker, v1alpha1.ManagerIDLabel, id)
	fmt.Fprintf(&b, "  namespaces jobferry made there: kubectl --context %s get namespaces -l %s=%s\n", l.worker, v1alpha1.ManagerIDLabel, id)
	fmt.Fprintf(&b, "Then uninstall the worker side there (with the release and namespace it was installed as):\n  helm uninstall jobferry-worker -n jobferry-system --kube-context %s\n", l.worker)
	return b.String()
}
