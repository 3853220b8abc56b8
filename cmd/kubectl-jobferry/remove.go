package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/internal/managedjobs"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
)

// removeOptions are the flags of `kubectl jobferry remove`.
type removeOptions struct {
	dryRun  bool
	force   bool
	timeout time.Duration
	// poll is how often the wait reads the Jobs again.
	poll time.Duration
}

// removeShown bounds the Jobs a message names.
const removeShown = 20

// removeReadTimeout bounds each read of the wait.
const removeReadTimeout = 30 * time.Second

// removeSettle is how many reads in a row (removeSettle-1 polls apart)
// must find nothing running once the manager has seen the cordon: a
// placement the manager decided just before may still be being written.
const removeSettle = 3

func newRemoveCommand(o *options) *cobra.Command {
	r := &removeOptions{poll: 5 * time.Second}
	cmd := &cobra.Command{
		Use:               "remove WORKER",
		ValidArgsFunction: completeWorkers(o),
		Short:             "Remove a worker: cordon it, wait until nothing of this manager runs there, delete its WorkerCluster and kubeconfig Secret",
		Long: `remove takes a worker out of the manager for good:
  1. cordons it (no new Job is placed there);
  2. waits, up to --timeout, until no Job placed there is unfinished and, on
     the worker itself (read with the manager's credential for it), no
     mirror of this manager still runs — a redispatched or deleted Job's
     mirror included. A Job cannot be moved while its mirror may run there:
     wait for it, or delete it. On timeout it stops; the worker stays
     cordoned and registered;
  3. deletes its WorkerCluster and its kubeconfig Secret;
  4. prints what is left on the worker: the mirrors of finished Jobs and the
     namespaces jobferry made there, and the worker chart's helm uninstall.
--dry-run prints what it would do, changing nothing. --force skips the
worker's side, for a worker that is gone for good: whatever still runs
there then runs unwatched.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.run(cmd.Context(), o, cmd.OutOrStdout(), args[0])
		},
	}
	f := cmd.Flags()
	f.BoolVar(&r.dryRun, "dry-run", false, "print what would be done, changing nothing")
	f.BoolVar(&r.force, "force", false, "do not read the worker (gone for good): remove it once no Job placed there is unfinished, whatever runs there")
	f.DurationVar(&r.timeout, "timeout", 10*time.Minute, "how long to wait for the Jobs placed on the worker, and its mirrors, to finish")
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
	id, err := readManagerID(ctx, m, o.systemNamespace)
	if err != nil {
		return err
	}
	if id.id == "" {
		return fmt.Errorf("this manager's installation ID could not be read (%v): without it its mirrors on %s cannot be told from others'", id.unreadable, worker)
	}
	unfinished, _, err := managedjobs.List(ctx, m.kube, worker)
	if err != nil {
		return err
	}
	secret := wc.Spec.KubeConfig.SecretRef.Name
	shared, err := secretSharedWith(ctx, m.client, worker, secret)
	if err != nil {
		return err
	}
	var w *workerMirrors
	if !r.force {
		if w, err = r.workerSide(ctx, m, o.systemNamespace, wc, id.id); err != nil {
			return err
		}
	}
	if r.dryRun {
		var running []string
		left := leftOnWorker{worker: worker, managerID: id.id, finished: -1}
		if w != nil {
			if running, left.finished, err = w.read(ctx); err != nil {
				return fmt.Errorf("reading the mirrors on %s: %w (--force skips the worker's side)", worker, err)
			}
		}
		fmt.Fprint(out, removalPlan(worker, wc.Spec.Cordoned, unfinished, running, o.systemNamespace, secret, shared, left))
		return nil
	}

	if _, err := setCordoned(ctx, m.client, worker, true); err != nil {
		return err
	}
	fmt.Fprintf(out, "workercluster/%s cordoned: no new Job is placed there\n", worker)
	if err := r.waitForJobs(ctx, m, w, out, worker); err != nil {
		return err
	}
	left := leftOnWorker{worker: worker, managerID: id.id, finished: -1}
	if w != nil {
		var running []string
		if running, left.finished, err = w.read(ctx); err != nil {
			return fmt.Errorf("reading the mirrors on %s: %w", worker, err)
		}
		if len(running) > 0 {
			return fmt.Errorf("a mirror started on %s after the wait found none:\n%sNothing was deleted; %s stays cordoned; run remove again", worker, waitingFor(worker, nil, running), worker)
		}
	}
	if err := deleteWorker(ctx, m, out, o.systemNamespace, worker, secret, shared); err != nil {
		return err
	}
	fmt.Fprint(out, left.String())
	return nil
}

// deleteWorker deletes the cordoned WorkerCluster, unless uncordoned
// meanwhile, and its kubeconfig Secret, unless another WorkerCluster uses it
// (shared).
func deleteWorker(ctx context.Context, m *managerClients, out io.Writer, namespace, worker, secret, shared string) error {
	wc := &v1alpha1.WorkerCluster{}
	// Uncordoned meanwhile (by someone else): it is in use again.
	if err := m.client.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
		return fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
	}
	if !wc.Spec.Cordoned {
		return fmt.Errorf("WorkerCluster %s was uncordoned while remove waited: nothing was deleted", worker)
	}
	if err := m.client.Delete(ctx, wc, client.Preconditions{UID: &wc.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting WorkerCluster %s: %w", worker, err)
	}
	fmt.Fprintf(out, "workercluster/%s deleted\n", worker)
	switch {
	case secret == "":
	case shared != "":
		fmt.Fprintf(out, "secret/%s kept in %s: WorkerCluster %s uses it too\n", secret, namespace, shared)
	default:
		s := &corev1.Secret{}
		s.Namespace, s.Name = namespace, secret
		switch err := m.client.Delete(ctx, s); {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "secret/%s was already gone from %s\n", secret, namespace)
		case err != nil:
			return fmt.Errorf("deleting the kubeconfig Secret %s/%s of worker %s (its WorkerCluster is deleted): %w", namespace, secret, worker, err)
		default:
			fmt.Fprintf(out, "secret/%s deleted from %s\n", secret, namespace)
		}
	}
	return nil
}

// secretSharedWith names another WorkerCluster whose kubeconfig is the same
// Secret (none: ""): its Secret is then not the removed worker's to delete.
func secretSharedWith(ctx context.Context, c client.Client, worker, secret string) (string, error) {
	var list v1alpha1.WorkerClusterList
	if err := c.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing WorkerClusters: %w", err)
	}
	for _, other := range list.Items {
		if other.Name != worker && secret != "" && other.Spec.KubeConfig.SecretRef.Name == secret {
			return other.Name, nil
		}
	}
	return "", nil
}

// workerMirrors reads this manager's mirrors on a worker, with the
// manager's own credential for it (the kubeconfig Secret): the worker's
// own account of what still runs there, which no manager Job's status
// (written by its tenant too) stands in for.
type workerMirrors struct {
	kube       kubernetes.Interface
	managerID  string
	namespaces []string
}

// workerSide connects to the worker as the manager does.
func (r *removeOptions) workerSide(ctx context.Context, m *managerClients, systemNamespace string, wc *v1alpha1.WorkerCluster, managerID string) (*workerMirrors, error) {
	ref := wc.Spec.KubeConfig.SecretRef
	s, err := m.kube.CoreV1().Secrets(systemNamespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s of worker %s, to see what runs there: %w (--force skips the worker's side)", systemNamespace, ref.Name, wc.Name, err)
	}
	key := ref.KeyOrDefault()
	// Read as the manager reads it: no exec plugin, auth provider, file,
	// plain HTTP, proxy or skipped verification runs here on the
	// administrator's machine, whoever wrote the Secret.
	cfg, err := workerkubeconfig.RESTConfig(s.Data[key])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig in Secret %s/%s (key %s): %w (--force skips the worker's side)", systemNamespace, ref.Name, key, err)
	}
	cfg.Timeout = removeReadTimeout
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &workerMirrors{kube: kube, managerID: managerID, namespaces: wc.Spec.Namespaces}, nil
}

// read lists this manager's mirrors on the worker: those that may still
// run (by namespace/name), and how many are finished.
func (w *workerMirrors) read(ctx context.Context) (running []string, finished int, err error) {
	namespaces := w.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	selector := v1alpha1.ManagerIDLabel + "=" + w.managerID
	for _, ns := range namespaces {
		opts := metav1.ListOptions{LabelSelector: selector, Limit: 100}
		for {
			page, err := w.kube.BatchV1().Jobs(ns).List(ctx, opts)
			if err != nil {
				return nil, 0, err
			}
			for i := range page.Items {
				if mirrorRuns(&page.Items[i]) {
					running = append(running, page.Items[i].Namespace+"/"+page.Items[i].Name)
				} else {
					finished++
				}
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
	}
	sort.Strings(running)
	return running, finished, nil
}

// mirrorRuns reports whether a mirror may still run pods: not finished,
// or with pods still active or terminating.
func mirrorRuns(m *batchv1.Job) bool {
	return !jobstatus.Finished(m.Status) || m.Status.Active > 0 || ptr.Deref(m.Status.Terminating, 0) > 0
}

// waitForJobs waits until the manager has seen the cordon, no Job placed
// on the worker is unfinished and (unless w is nil) no mirror of this
// manager runs there, saying what it waits for.
func (r *removeOptions) waitForJobs(ctx context.Context, m *managerClients, w *workerMirrors, out io.Writer, worker string) error {
	var (
		unfinished []managedjobs.Job
		running    []string
		seen       bool
		lastErr    error
		zeros      int
		shown      = ""
	)
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(context.Context) (bool, error) {
		// Reads on a deadline of their own, not the wait's: the last one
		// before the timeout reads as any other. A failed read is tried
		// again until the timeout, which names it.
		ctx, cancel := context.WithTimeout(ctx, removeReadTimeout)
		defer cancel()
		wc := &v1alpha1.WorkerCluster{}
		if err := m.client.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
			lastErr = fmt.Errorf("reading WorkerCluster %s: %w", worker, err)
			return false, nil
		}
		seen = cordonSeen(wc)
		list, _, err := managedjobs.List(ctx, m.kube, worker)
		if err != nil {
			lastErr = err
			return false, nil
		}
		unfinished = list
		if w != nil {
			if running, _, err = w.read(ctx); err != nil {
				lastErr = fmt.Errorf("reading the mirrors on %s: %w", worker, err)
				return false, nil
			}
		}
		lastErr = nil
		if state := waitingFor(worker, unfinished, running); state != shown {
			fmt.Fprint(out, state)
			shown = state
		}
		if !seen || len(unfinished) > 0 || len(running) > 0 {
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
	case lastErr != nil:
		return fmt.Errorf("after %s what runs on %s could not be read: %w. Nothing was deleted; %s stays cordoned. Run remove again once it can be read, or with --force if the worker is gone for good (whatever runs there then runs unwatched)", r.timeout, worker, lastErr, worker)
	case !seen:
		return fmt.Errorf("after %s the manager has not yet seen that %s is cordoned (its conditions' observedGeneration is older than the WorkerCluster's): is the manager running? Nothing was deleted; run remove again", r.timeout, worker)
	default:
		return fmt.Errorf("after %s, work of this manager is still unfinished on %s:\n%sNothing was deleted; %s stays cordoned. Wait longer (--timeout) or delete those Jobs, then run remove again; `kubectl jobferry uncordon %s` takes it back into use",
			r.timeout, worker, waitingFor(worker, unfinished, running), worker, worker)
	}
}

// waitingFor says what the wait still waits for ("" for nothing).
func waitingFor(worker string, unfinished []managedjobs.Job, running []string) string {
	var b strings.Builder
	if len(unfinished) > 0 {
		fmt.Fprintf(&b, "%d unfinished Jobs placed on %s:\n%s", len(unfinished), worker, managedjobs.Lines(unfinished, removeShown))
	}
	if len(running) > 0 {
		fmt.Fprintf(&b, "%d mirrors still running on %s:\n%s", len(running), worker, managedjobs.Indented(running, removeShown))
	}
	return b.String()
}

// cordonSeen reports whether the manager has judged the WorkerCluster as it
// is now (cordoned): its Connected condition is of this generation.
func cordonSeen(wc *v1alpha1.WorkerCluster) bool {
	c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected)
	return wc.Spec.Cordoned && c != nil && c.ObservedGeneration >= wc.Generation
}

// removalPlan is what --dry-run prints. running is nil when the worker's
// side is not read (--force).
func removalPlan(worker string, cordoned bool, unfinished []managedjobs.Job, running []string, systemNamespace, secret, shared string, left leftOnWorker) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remove %s would (dry run, nothing changed):\n", worker)
	if cordoned {
		fmt.Fprintf(&b, "- keep workercluster/%s cordoned\n", worker)
	} else {
		fmt.Fprintf(&b, "- cordon workercluster/%s: no new Job is placed there\n", worker)
	}
	if state := waitingFor(worker, unfinished, running); state == "" {
		fmt.Fprintf(&b, "- wait for nothing: no Job placed on %s is unfinished, no mirror runs there\n", worker)
	} else {
		fmt.Fprintf(&b, "- wait for %s", indent(state))
	}
	fmt.Fprintf(&b, "- delete workercluster/%s\n", worker)
	switch {
	case secret == "":
	case shared != "":
		fmt.Fprintf(&b, "- keep secret/%s in %s: WorkerCluster %s uses it too\n", secret, systemNamespace, shared)
	default:
		fmt.Fprintf(&b, "- delete secret/%s from %s\n", secret, systemNamespace)
	}
	b.WriteString(left.String())
	return b.String()
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// leftOnWorker is what a removed worker still holds of this manager, which
// the manager can no longer reach: mirrors of finished Jobs (kept until the
// Job is deleted, unless the manager deletes finished mirrors) and the
// namespaces it made.
type leftOnWorker struct {
	worker, managerID string
	// finished counts the finished mirrors there; -1: not read.
	finished int
}

func (l leftOnWorker) String() string {
	var b strings.Builder
	count := ""
	if l.finished >= 0 {
		count = fmt.Sprintf(" (%d)", l.finished)
	}
	fmt.Fprintf(&b, "Left on the worker, which this manager no longer reaches (delete them there when no longer needed):\n")
	fmt.Fprintf(&b, "  mirrors of finished Jobs%s: kubectl --context %s get jobs -A -l %s=%s\n", count, l.worker, v1alpha1.ManagerIDLabel, l.managerID)
	fmt.Fprintf(&b, "  namespaces jobferry made there: kubectl --context %s get namespaces -l %s=%s\n", l.worker, v1alpha1.ManagerIDLabel, l.managerID)
	fmt.Fprintf(&b, "Then uninstall the worker side there (with the release and namespace it was installed as):\n  helm uninstall jobferry-worker -n jobferry-system --kube-context %s\n", l.worker)
	return b.String()
}
