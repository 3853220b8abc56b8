package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/installation"
)

// NamespacesAnnotation on the worker chart's ServiceAccount for the manager
// lists the namespaces it has rights in (the chart's namespaced mode).
const NamespacesAnnotation = "jobferry.dev/namespaces"

// ManagerIDAnnotation on that ServiceAccount names the manager installation
// the chart's admission policy is pinned to (managerIdentity.managerID).
const ManagerIDAnnotation = v1alpha1.ManagerIDLabel

// dryRunToken stands in for the token in --dry-run output: no token is
// minted then.
const dryRunToken = "<minted by the TokenRequest API when not a dry run>"

type joinOptions struct {
	workerContext, workerKubeconfig, managerContext string
	workerNamespace, serviceAccount                 string
	server                                          string
	tokenLifetime                                   time.Duration
	jobController                                   string
	dryRun                                          bool
	wait                                            time.Duration
}

func newJoinCommand(o *options) *cobra.Command {
	j := &joinOptions{}
	cmd := &cobra.Command{
		Use:   "join WORKER --worker-context CONTEXT",
		Short: "Register a worker cluster with the manager, with a short-lived token the manager renews itself",
		Long: `join registers the worker cluster of --worker-context with the manager as the
WorkerCluster WORKER. It needs the jobferry-worker chart installed there: it asks
the worker's TokenRequest API for a token of the chart's ServiceAccount for the
manager (bounded by --token-lifetime), writes a self-contained kubeconfig
(server, CA data, token) into a Secret in the manager's jobferry namespace and
creates or updates the WorkerCluster naming it. The manager renews the token
before it expires. Running join again replaces the token; nothing else changes.`,
		Example: `  kubectl jobferry join gpu-east --worker-context gpu-east --context manager
  kubectl jobferry join gpu-east --worker-context gpu-east --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return j.run(cmd.Context(), o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&j.workerContext, "worker-context", "", "kubeconfig context of the worker cluster (required)")
	f.StringVar(&j.workerKubeconfig, "worker-kubeconfig", "", "kubeconfig file holding --worker-context (default: the same kubeconfig as the manager's)")
	f.StringVar(&j.managerContext, "manager-context", "", "kubeconfig context of the manager cluster (default: --context, then the current context)")
	f.StringVar(&j.workerNamespace, "worker-namespace", "jobferry-system", "namespace of the jobferry-worker release on the worker")
	f.StringVar(&j.serviceAccount, "service-account", "jobferry-manager", "the worker chart's ServiceAccount for the manager (managerIdentity.serviceAccountName)")
	f.StringVar(&j.server, "worker-server", "", "the worker's API server address as the manager reaches it (default: the server of --worker-context)")
	f.DurationVar(&j.tokenLifetime, "token-lifetime", 24*time.Hour, "lifetime of the token (at least 10m; the worker's API server may cap it)")
	f.StringVar(&j.jobController, "job-controller", "", "which controller runs mirrors there: Builtin (kube-controller-manager) or Worker (the jobferry worker); default: unchanged, Builtin for a new WorkerCluster")
	f.BoolVar(&j.dryRun, "dry-run", false, "print the Secret and WorkerCluster that would be written, and write nothing (no token is minted)")
	f.DurationVar(&j.wait, "wait", time.Minute, "how long to wait for the manager to report the worker Connected and Authorized; 0: do not wait")
	_ = cmd.MarkFlagRequired("worker-context")
	return cmd
}

func (j *joinOptions) run(ctx context.Context, o *options, worker string) error {
	if err := j.check(worker); err != nil {
		return err
	}
	if j.managerContext != "" {
		*o.flags.Context = j.managerContext
	}
	target, workerKube, sa, err := j.readWorker(ctx, o)
	if err != nil {
		return err
	}
	m, err := o.manager()
	if err != nil {
		return err
	}
	// Before a token is minted: a chart pinned to another manager refuses
	// every mirror this one would create.
	manager, err := readManagerID(ctx, m, o.systemNamespace)
	if err != nil {
		return err
	}
	warning, err := checkPinned(sa, j.pinCommand(worker), manager)
	if err != nil {
		return err
	}
	if warning != "" {
		fmt.Fprintln(o.streams.ErrOut, "Warning: "+warning)
	}

	token, expires, err := j.token(ctx, workerKube)
	if err != nil {
		return err
	}
	kubeconfig, err := workerKubeconfig(worker, target.server, target.caData, j.serviceAccount, token)
	if err != nil {
		return err
	}

	existing := &v1alpha1.WorkerCluster{}
	if err := m.client.Get(ctx, types.NamespacedName{Name: worker}, existing); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading WorkerCluster %s on the manager: %w", worker, err)
		}
		existing = nil
	}
	secret, wc := joinObjects(worker, o.systemNamespace, existing, kubeconfig, namespacesOf(sa), v1alpha1.JobControllerMode(j.jobController))
	out := o.streams.Out
	if j.dryRun {
		return printObjects(out, dryRunView(secret, wc)...)
	}
	secretResult, err := applySecret(ctx, m.client, secret)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "secret/%s %s in namespace %s\n", secret.Name, secretResult, secret.Namespace)
	wcResult, err := applyWorkerCluster(ctx, m.client, wc)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "workercluster.jobferry.dev/%s %s\n", wc.Name, wcResult)
	fmt.Fprintf(out, "token of ServiceAccount %s/%s on %s expires at %s (in %s); the manager renews it before then\n",
		j.workerNamespace, j.serviceAccount, target.server, expires.UTC().Format(time.RFC3339), time.Until(expires).Round(time.Minute))
	if j.wait <= 0 {
		return nil
	}
	return waitJoined(ctx, out, m.client, worker, j.wait)
}

// check refuses a worker name and flags that cannot make a worker.
func (j *joinOptions) check(worker string) error {
	if errs := validation.IsDNS1123Subdomain(worker); len(errs) > 0 {
		return fmt.Errorf("WORKER %q is not a valid WorkerCluster name: %s", worker, strings.Join(errs, "; "))
	}
	if j.tokenLifetime < 10*time.Minute {
		return fmt.Errorf("--token-lifetime %s is shorter than the 10m the TokenRequest API issues", j.tokenLifetime)
	}
	if j.jobController != "" && j.jobController != string(v1alpha1.JobControllerBuiltin) && j.jobController != string(v1alpha1.JobControllerWorker) {
		return fmt.Errorf("--job-controller must be %s or %s, got %q", v1alpha1.JobControllerBuiltin, v1alpha1.JobControllerWorker, j.jobController)
	}
	return nil
}

// readWorker reads what joining takes of the worker: its address and CA,
// and the ServiceAccount of its chart that the manager acts as.
func (j *joinOptions) readWorker(ctx context.Context, o *options) (*workerTarget, kubernetes.Interface, *corev1.ServiceAccount, error) {
	target, err := j.workerTarget(o)
	if err != nil {
		return nil, nil, nil, err
	}
	workerKube, err := kubernetes.NewForConfig(target.config)
	if err != nil {
		return nil, nil, nil, err
	}
	// The chart installs the ClusterCapacity API with the worker binary; a
	// ServiceAccount of the same name alone (the manager chart's, on a
	// manager cluster) is no worker.
	if !hasClusterCapacity(workerKube) {
		return nil, nil, nil, fmt.Errorf("the jobferry-worker chart is not installed on context %s: it serves no ClusterCapacity API (%s); install it with `helm install jobferry-worker charts/jobferry-worker -n %s --create-namespace`",
			j.workerContext, v1alpha1.GroupVersion, j.workerNamespace)
	}
	sa, err := workerKube.CoreV1().ServiceAccounts(j.workerNamespace).Get(ctx, j.serviceAccount, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil, fmt.Errorf("the jobferry-worker chart is not installed in namespace %s of context %s: it has no ServiceAccount %s (install it with `helm install jobferry-worker charts/jobferry-worker -n %s --create-namespace`, or name another with --worker-namespace / --service-account)",
			j.workerNamespace, j.workerContext, j.serviceAccount, j.workerNamespace)
	case err != nil:
		return nil, nil, nil, fmt.Errorf("reading ServiceAccount %s/%s on context %s: %w", j.workerNamespace, j.serviceAccount, j.workerContext, err)
	}
	if target.caData == nil {
		// A context that trusts the system's CAs: the manager needs the CA
		// inline; the cluster publishes it in every namespace.
		root, err := workerKube.CoreV1().ConfigMaps(j.workerNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil || root.Data["ca.crt"] == "" {
			return nil, nil, nil, fmt.Errorf("context %s names no CA for its server and ConfigMap %s/kube-root-ca.crt could not be read (%v): the manager accepts only kubeconfigs with the CA inline", j.workerContext, j.workerNamespace, err)
		}
		target.caData = []byte(root.Data["ca.crt"])
	}
	return target, workerKube, sa, nil
}

// token mints the token the manager acts with on the worker (a dry run's
// placeholder for none).
func (j *joinOptions) token(ctx context.Context, workerKube kubernetes.Interface) (string, time.Time, error) {
	if j.dryRun {
		return dryRunToken, time.Time{}, nil
	}
	issued, err := workerKube.CoreV1().ServiceAccounts(j.workerNamespace).CreateToken(ctx, j.serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(j.tokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("a token for ServiceAccount %s/%s on context %s: %w", j.workerNamespace, j.serviceAccount, j.workerContext, err)
	}
	return issued.Status.Token, issued.Status.ExpirationTimestamp.Time, nil
}

// hasClusterCapacity reports whether the cluster serves the ClusterCapacity
// resource, which the worker chart's CRD adds.
func hasClusterCapacity(kube kubernetes.Interface) bool {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "clustercapacities" {
			return true
		}
	}
	return false
}

// workerTarget is the worker as --worker-context names it.
type workerTarget struct {
	config *rest.Config
	server string
	caData []byte
}

func (j *joinOptions) workerTarget(o *options) (*workerTarget, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	switch {
	case j.workerKubeconfig != "":
		rules.ExplicitPath = j.workerKubeconfig
	case ptr.Deref(o.flags.KubeConfig, "") != "":
		rules.ExplicitPath = *o.flags.KubeConfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: j.workerContext})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig of the worker: %w", err)
	}
	kctx, ok := raw.Contexts[j.workerContext]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no context %q (--worker-context); it has: %s", j.workerContext, strings.Join(contextNames(raw), ", "))
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("context %q names the cluster %q, which the kubeconfig does not define", j.workerContext, kctx.Cluster)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the worker's context %s: %w", j.workerContext, err)
	}
	target := &workerTarget{config: cfg, server: cluster.Server, caData: cluster.CertificateAuthorityData}
	if j.server != "" {
		target.server = j.server
	}
	if target.caData == nil && cluster.CertificateAuthority != "" {
		data, err := os.ReadFile(cluster.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("reading the CA of context %s: %w", j.workerContext, err)
		}
		target.caData = data
	}
	return target, nil
}

func contextNames(cfg clientcmdapi.Config) []string {
	var names []string
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// workerKubeconfig is the self-contained kubeconfig the manager uses for a
// worker: its server, its CA inline, the token.
func workerKubeconfig(worker, server string, caData []byte, user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[worker] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[worker] = &clientcmdapi.Context{Cluster: worker, AuthInfo: user}
	cfg.CurrentContext = worker
	return clientcmd.Write(*cfg)
}

// namespacesOf reads the namespaces the worker chart gave the identity
// rights in, from its ServiceAccount (empty: every namespace).
func namespacesOf(sa *corev1.ServiceAccount) []string {
	var out []string
	for _, ns := range strings.Split(sa.Annotations[NamespacesAnnotation], ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// managerID is what join knows of the manager's installation ID: the
// namespace it is of, the ID, or why it could not be read.
type managerID struct {
	namespace, id string
	unreadable    error
}

// readManagerID computes the manager's installation ID as the manager does
// (from its cluster's kube-system UID and its namespace), once the
// namespace is found: an ID computed for a namespace that is not there
// names no manager. Rights the joiner lacks leave the ID unread; no such
// namespace is an error.
func readManagerID(ctx context.Context, m *managerClients, systemNamespace string) (managerID, error) {
	read := managerID{namespace: systemNamespace}
	_, err := m.kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return read, fmt.Errorf("namespace %s is not on the manager cluster: name the manager chart's namespace with --jobferry-namespace", systemNamespace)
	case err != nil:
		read.unreadable = fmt.Errorf("reading namespace %s: %w", systemNamespace, err)
		return read, nil
	}
	read.id, read.unreadable = installation.ID(ctx, m.client, systemNamespace)
	return read, nil
}

// pinCommand is the helm command that pins the worker's chart to a manager
// ID, for the worker's context and kubeconfig; it names the worker too
// (workerName, which its metrics carry).
func (j *joinOptions) pinCommand(worker string) pinCommand {
	release := "jobferry-worker"
	args := []string{"helm", "upgrade", release, "<chart>", "-n", j.workerNamespace, "--kube-context", j.workerContext}
	if j.workerKubeconfig != "" {
		args = append(args, "--kubeconfig", j.workerKubeconfig)
	}
	return pinCommand{workerContext: j.workerContext, worker: worker, args: args}
}

// pinCommand is what checkPinned says of the worker: its context, and the
// helm command (but its last flags) that pins its chart.
type pinCommand struct {
	workerContext string
	// worker is the WorkerCluster's name (already checked by join: a DNS
	// subdomain), the chart's workerName.
	worker string
	args   []string
}

// forID is the whole command for the release the ServiceAccount belongs to
// (its helm instance label, else the chart's default release name).
func (c pinCommand) forID(sa *corev1.ServiceAccount, id string) string {
	args := slices.Clone(c.args)
	if release := sa.Labels["app.kubernetes.io/instance"]; release != "" && len(validation.IsDNS1123Subdomain(release)) == 0 {
		args[2] = release
	}
	// --set-string: an ID of digits only would be read as a number, which
	// the chart's schema refuses.
	args = append(args, "--reset-then-reuse-values", "--set-string", "managerIdentity.managerID="+id)
	if c.worker != "" {
		// --set-string: a name such as 1234 or true is a string too.
		args = append(args, "--set-string", "workerName="+c.worker)
	}
	return strings.Join(args, " ")
}

// managerIDPattern is what an installation ID looks like (installation.ID).
var managerIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// checkPinned compares the manager a worker chart's admission policies are
// pinned to (its ServiceAccount's ManagerIDAnnotation, which whoever may
// update that ServiceAccount writes: the worker's administrator) with this
// manager's ID. Pinned to another, or to no ID at all: an error, as those
// policies refuse every mirror this manager would create. Not pinned: a
// warning, as the policies then let the token write Jobs in any jobferry
// manager's namespaces on the worker; it prints the command that pins it.
func checkPinned(sa *corev1.ServiceAccount, pin pinCommand, manager managerID) (warning string, err error) {
	pinned, isPinned := sa.Annotations[ManagerIDAnnotation]
	switch {
	case isPinned && !managerIDPattern.MatchString(pinned):
		return "", fmt.Errorf("the jobferry-worker chart on context %s is pinned to %.64q, which is no manager's installation ID (16 hexadecimal digits): its admission policy would refuse every mirror", pin.workerContext, pinned)
	case manager.unreadable != nil && isPinned:
		return fmt.Sprintf("the jobferry-worker chart on context %s is pinned to manager %s; this manager's ID could not be read to compare (%v)", pin.workerContext, pinned, manager.unreadable), nil
	case manager.unreadable != nil:
		return fmt.Sprintf("the jobferry-worker chart on context %s is not pinned to a manager (managerIdentity.managerID), and this manager's ID could not be read to name it (%v)", pin.workerContext, manager.unreadable), nil
	case !isPinned:
		return fmt.Sprintf("the jobferry-worker chart on context %s is not pinned to this manager (ID %s, of namespace %s): its admission policies let the manager identity write Jobs, and relabel namespaces, in any jobferry manager's namespaces there. Pin it with\n  %s",
			pin.workerContext, manager.id, manager.namespace, pin.forID(sa, manager.id)), nil
	case pinned != manager.id:
		return "", fmt.Errorf("the jobferry-worker chart on context %s is pinned to manager %s, not to this one (ID %s, of namespace %s: is --jobferry-namespace the manager's?): its admission policies would refuse every mirror this manager creates there. This manager needs an identity of its own there; pinning this one to it instead (%s) takes manager %s's rights there away, even to delete its mirrors",
			pin.workerContext, pinned, manager.id, manager.namespace, pin.forID(sa, manager.id), pinned)
	}
	return "", nil
}

// joinObjects are the Secret and WorkerCluster join writes: an existing
// WorkerCluster keeps its Secret name, key, scheduling, cordon and labels.
func joinObjects(worker, systemNamespace string, existing *v1alpha1.WorkerCluster, kubeconfig []byte, namespaces []string, controller v1alpha1.JobControllerMode) (*corev1.Secret, *v1alpha1.WorkerCluster) {
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: worker}}
	if existing != nil {
		wc = existing.DeepCopy()
	}
	wc.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WorkerCluster"}
	ref := &wc.Spec.KubeConfig.SecretRef
	if ref.Name == "" {
		ref.Name = worker + "-kubeconfig"
	}
	ref.Key = ref.KeyOrDefault()
	wc.Spec.Namespaces = namespaces
	if controller != "" {
		wc.Spec.JobController = controller
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: ref.Name, Labels: map[string]string{v1alpha1.WorkerAnnotation: worker}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ref.Key: kubeconfig},
	}
	return secret, wc
}

// applySecret creates the Secret or sets its key; other keys stay. An
// update that races with another writer is retried on a fresh read.
func applySecret(ctx context.Context, c client.Client, want *corev1.Secret) (string, error) {
	result := ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
		if apierrors.IsNotFound(err) {
			if err := c.Create(ctx, want); err != nil {
				return fmt.Errorf("creating Secret %s/%s on the manager: %w", want.Namespace, want.Name, err)
			}
			result = "created"
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading Secret %s/%s on the manager: %w", want.Namespace, want.Name, err)
		}
		updated := have.DeepCopy()
		if updated.Data == nil {
			updated.Data = map[string][]byte{}
		}
		for k, v := range want.Data {
			updated.Data[k] = v
		}
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			updated.Labels[k] = v
		}
		if equality.Semantic.DeepEqual(updated, have) {
			result = "unchanged"
			return nil
		}
		if err := c.Update(ctx, updated); err != nil {
			return fmt.Errorf("updating Secret %s/%s on the manager: %w", want.Namespace, want.Name, err)
		}
		result = "configured"
		return nil
	})
	return result, err
}

// applyWorkerCluster creates the WorkerCluster or sets its spec. The
// manager writes its status all the while, so an update that races with
// that is retried on a fresh read.
func applyWorkerCluster(ctx context.Context, c client.Client, want *v1alpha1.WorkerCluster) (string, error) {
	if want.ResourceVersion == "" {
		if err := c.Create(ctx, want); err != nil {
			return "", fmt.Errorf("creating WorkerCluster %s on the manager: %w", want.Name, err)
		}
		return "created", nil
	}
	result := ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have := &v1alpha1.WorkerCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
			return fmt.Errorf("reading WorkerCluster %s on the manager: %w", want.Name, err)
		}
		if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
			result = "unchanged"
			return nil
		}
		have.Spec = want.Spec
		if err := c.Update(ctx, have); err != nil {
			return fmt.Errorf("updating WorkerCluster %s on the manager: %w", want.Name, err)
		}
		result = "configured"
		return nil
	})
	return result, err
}

// dryRunView is what --dry-run prints: the kubeconfig readable (its token
// is the placeholder), the WorkerCluster as it would be written, without
// what the server keeps on it.
func dryRunView(secret *corev1.Secret, wc *v1alpha1.WorkerCluster) []any {
	secret = secret.DeepCopy()
	secret.StringData = map[string]string{}
	for k, v := range secret.Data {
		secret.StringData[k] = string(v)
	}
	secret.Data = nil
	view := &v1alpha1.WorkerCluster{TypeMeta: wc.TypeMeta, Spec: wc.Spec}
	view.Name, view.Labels, view.Annotations = wc.Name, wc.Labels, wc.Annotations
	return []any{secret, view}
}

// printObjects writes objects as a YAML stream.
func printObjects(out io.Writer, objects ...any) error {
	for _, obj := range objects {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "---\n%s", data)
	}
	return nil
}

// waitJoined waits until the manager reports the worker Connected and
// Authorized, and says what it reports when that does not come.
func waitJoined(ctx context.Context, out io.Writer, c client.Client, worker string, timeout time.Duration) error {
	var last *v1alpha1.WorkerCluster
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := c.Get(ctx, types.NamespacedName{Name: worker}, wc); err != nil {
			return false, err
		}
		last = wc
		return meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionConnected) &&
			meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionAuthorized), nil
	})
	if err == nil {
		fmt.Fprintf(out, "worker %s is Connected and Authorized\n", worker)
		return nil
	}
	if last == nil {
		return fmt.Errorf("waiting for worker %s: %w", worker, err)
	}
	var states []string
	for _, t := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionAuthorized} {
		if cond := meta.FindStatusCondition(last.Status.Conditions, t); cond != nil {
			states = append(states, fmt.Sprintf("%s=%s (%s: %s)", t, cond.Status, cond.Reason, cond.Message))
		} else {
			states = append(states, t+" not reported yet (is the manager running?)")
		}
	}
	if wait.Interrupted(err) {
		return fmt.Errorf("worker %s registered, but not Connected and Authorized within %s: %s", worker, timeout, strings.Join(states, "; "))
	}
	return fmt.Errorf("waiting for worker %s: %w; %s", worker, err, strings.Join(states, "; "))
}
