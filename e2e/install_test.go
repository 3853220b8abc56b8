//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	managerworkers "github.com/jobferry/jobferry/manager/workers"
)

// The install path, proven on real control planes: both charts installed
// with the real helm (the manager chart on the manager cluster, the worker
// chart on each worker), then bin/manager and bin/worker run as local
// processes with the identities of the charts' ServiceAccounts (tokens from
// the TokenRequest API) and the arguments the charts' Deployments render —
// parsed from the release manifests, so a flag a chart gets wrong fails here.
// Only addresses change: the processes listen on free loopback ports, the
// certificate also names localhost, and the webhook configurations are
// pointed at the local manager's URL (the API server cannot reach a Service
// without pods). Dispatch, suspend and resume, a name conflict, deletion,
// cordon, orphan collection and worker loss then pass under those
// identities. Least privilege: every API server keeps an audit log, and
// every (verb, resource) the charts grant the manager's ServiceAccount and
// the manager's identity on each worker is used by some flow — a granted
// rule nothing used fails the test, naming it — while no request of theirs
// or of the worker binaries is refused.
func TestInstallWithChartsLeastPrivilege(t *testing.T) {
	ctx := t.Context()
	dir := outputDir(t)
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	env, err := localcluster.StartEnvironment(startCtx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", Audit: true},
		Workers: []localcluster.Spec{
			{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2)}, Audit: true},
			{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}, Audit: true},
		},
	}, localcluster.EnvironmentOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	const ns = devenv.SystemNamespace
	// client-go streams an informer's initial list in a watch when the API
	// server can (WatchList); against one that cannot, it lists. The charts
	// grant list and watch for the second case; the binaries list here (the
	// processes inherit this), so the audit sees every granted verb used.
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")

	// The charts, as a platform team installs them (timings short enough
	// for a test).
	// Workers join with tokens of the shortest lifetime the API issues
	// (10 min), which the manager renews once 1% of it has passed (6 s):
	// many renewals during the test, each one a Secret write and a token
	// swapped under live traffic.
	// Kueue on the manager cluster, and the manager chart in Kueue mode:
	// its Kueue rules are audited with the rest ("kueue").
	if _, err := env.Manager.StartKueue(startCtx, localcluster.KueueOptions{BinDir: bin}); err != nil {
		t.Fatal(err)
	}
	helm(ctx, t, env.Manager.KubeconfigPath, append([]string{"install", "jobferry-manager", "charts/jobferry-manager", "-n", ns, "--create-namespace",
		"--set", "dispatch.workerLostTimeout=8s", "--set", "dispatch.gcInterval=5s", "--set", "dispatch.workerNamespaceGrace=5s", "--set", "dispatch.workerHealthInterval=2s",
		"--set", "dispatch.credentialRenewalThreshold=0.01", "--set", "kueue.enabled=true",
		// This installation dispatches Jobs without a queue too.
		"--set", "kueue.requireQueueName=false",
		// Logs withheld from the default roles: a tenant is granted them,
		// a namespace administrator is not (checkInspectionAsTenant).
		"--set", "inspection.logs.aggregateToDefaultRoles=false",
		// Few streams a user, for the test to reach the limit.
		"--set", "inspection.logs.maxStreamsPerUser=4"}, metricsReaderValues(ns)...)...)
	managerObjects := manifestObjects(t, helm(ctx, t, env.Manager.KubeconfigPath, "get", "manifest", "jobferry-manager", "-n", ns))
	managerClient, err := client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// worker-1's chart is pinned to this manager, as the docs install it;
	// worker-2's is not (join warns of it).
	id := managerID(ctx, t, managerClient, ns)
	workerObjects := map[string][]map[string]any{}
	for _, w := range env.Workers {
		values := []string{"--set", "managerIdentity.allowNamespaceCreation=true", "--set", "managerIdentity.allowNamespaceDeletion=true", "--set", "managerIdentity.allowInspection=true",
			"--set", "workerName=" + w.Name}
		if w.Name == "worker-1" {
			values = append(values, "--set-string", "managerIdentity.managerID="+id)
		}
		helm(ctx, t, w.KubeconfigPath, append([]string{"install", "jobferry-worker", "charts/jobferry-worker", "-n", ns, "--create-namespace"}, values...)...)
		workerObjects[w.Name] = manifestObjects(t, helm(ctx, t, w.KubeconfigPath, "get", "manifest", "jobferry-worker", "-n", ns))
		checkInspectionFlow(ctx, t, w, ns)
	}

	// The manager, as its ServiceAccount, with the rendered arguments.
	ports, err := localcluster.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, probePort, webhookPort, inspectionPort := ports[0], ports[1], ports[2], ports[3]
	managerKubeconfig := filepath.Join(dir, "manager-sa.kubeconfig")
	tokenKubeconfig(ctx, t, env.Manager, ns, "jobferry-manager", managerKubeconfig)
	managerArgs := overrideArgs(t, deploymentArgs(t, managerObjects, "manager"), map[string]func(string) string{
		"--metrics-bind-address":         fixed("127.0.0.1:" + strconv.Itoa(metricsPort)),
		"--health-probe-bind-address":    fixed("127.0.0.1:" + strconv.Itoa(probePort)),
		"--webhook-port":                 fixed(strconv.Itoa(webhookPort)),
		"--inspection-bind-address":      fixed("127.0.0.1:" + strconv.Itoa(inspectionPort)),
		"--webhook-cert-dir":             fixed(filepath.Join(dir, "manager-certs")),
		"--webhook-cert-extra-dns-names": func(old string) string { return old + ",localhost" },
	}, "--kubeconfig="+managerKubeconfig, "--webhook-bind-host=127.0.0.1")
	t.Logf("manager arguments: %q", managerArgs)

	// The API server reaches the local manager, not the Service.
	admin, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	pointWebhooksAt(ctx, t, admin, fmt.Sprintf("https://localhost:%d", webhookPort))
	pointInspectionAt(ctx, t, admin, env.Manager.RESTConfig(), ns, "jobferry-manager-webhook", inspectionPort)

	managerProcess, err := env.Manager.StartComponent("jobferry-manager", filepath.Join(bin, "manager"), managerArgs...)
	if err != nil {
		t.Fatal(err)
	}
	// Ready only once the certificate it issued is served and its CA is in
	// both webhook configurations.
	waitReady(ctx, t, managerProcess, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort))
	for _, name := range []string{"jobferry-manager-opt-in", "jobferry-manager-validate"} {
		if bundle := caBundleOf(ctx, t, admin, name); len(bundle) == 0 {
			t.Fatalf("%s has no CA bundle although the manager is ready", name)
		}
	}
	// The aggregator reaches the inspection API with the CA the manager
	// put into its APIService.
	waitInspectionAvailable(ctx, t, env.Manager.RESTConfig())
	// Ready means the webhooks answer: the first Job created afterwards is
	// admitted by them, with no retry.
	firstNS := (&dispatchEnv{manager: admin}).optedInNamespace(ctx, t)
	first, err := admin.BatchV1().Jobs(firstNS).Create(ctx, sleepJob(firstNS, "first", time.Second), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the first Job after the manager turned ready: %v", err)
	}
	if ptr.Deref(first.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
		t.Fatalf("the first Job after the manager turned ready was not opted in: managedBy %v", first.Spec.ManagedBy)
	}
	checkBudgetWebhookAnswers(ctx, t, admin, first)
	// The metrics endpoint serves HTTPS with the certificate the manager
	// issued, verified against the CA in its Secret, for the metrics
	// Service's name, as the chart's ServiceMonitor does.
	scrapeVerified(ctx, t, admin, ns, "jobferry-manager-webhook-cert", "jobferry-manager-metrics."+ns+".svc", fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort))
	// Only to a token allowed to get /metrics (issue 44 item 5).
	for who, want := range map[string]struct {
		token string
		code  int
		says  string
	}{
		"no token":                     {"", http.StatusUnauthorized, "Unauthorized"},
		"a token not allowed /metrics": {serviceAccountToken(ctx, t, admin, ns, "not-a-metrics-reader"), http.StatusForbidden, "Authorization denied for user system:serviceaccount:" + ns + ":not-a-metrics-reader"},
	} {
		resp := getVerifiedMetrics(ctx, t, admin, ns, "jobferry-manager-webhook-cert", "jobferry-manager-metrics."+ns+".svc", fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort), want.token)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.code || !strings.Contains(string(body), want.says) {
			t.Errorf("the metrics with %s: %s %q, want %d saying %q", who, resp.Status, body, want.code, want.says)
		}
	}

	// Each worker binary as its ServiceAccount; each worker joined with
	// `kubectl jobferry join`, from a kubeconfig holding every cluster.
	userKubeconfig := mergedKubeconfig(t, env, filepath.Join(dir, "kubeconfig"))
	tokens := watchTokens(ctx, t, admin, ns)
	if out, err := plugin(ctx, t, userKubeconfig, "join", "worker-1", "--worker-context", env.Manager.Name, "--wait=0"); err == nil || !strings.Contains(out, "the jobferry-worker chart is not installed on context manager") {
		t.Errorf("join against a cluster without the worker chart: %v\n%s", err, out)
	}
	checkJoinComparesTheManagerID(ctx, t, admin, userKubeconfig, ns, id)
	workers := map[string]kubernetes.Interface{}
	workerProbes := map[string]string{}
	for _, w := range env.Workers {
		ports, err := localcluster.FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := filepath.Join(dir, w.Name+"-worker-sa.kubeconfig")
		tokenKubeconfig(ctx, t, w, ns, "jobferry-worker", kubeconfig)
		args := overrideArgs(t, deploymentArgs(t, workerObjects[w.Name], "worker"), map[string]func(string) string{
			"--metrics-bind-address":      fixed("127.0.0.1:" + strconv.Itoa(ports[0])),
			"--health-probe-bind-address": fixed("127.0.0.1:" + strconv.Itoa(ports[1])),
		}, "--kubeconfig="+kubeconfig)
		p, err := w.StartComponent("jobferry-worker", filepath.Join(bin, "worker"), args...)
		if err != nil {
			t.Fatal(err)
		}
		workerProbes[w.Name] = fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
		waitReady(ctx, t, p, workerProbes[w.Name])
		// The chart's workerName: the worker's own metrics carry it, for the
		// dashboards, with no relabelling.
		families, err := replicaMetrics(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]))
		if err != nil {
			t.Fatal(err)
		}
		if info := families["jobferry_build_info"]; info == nil || len(info.GetMetric()) != 1 || !slices.ContainsFunc(info.GetMetric()[0].GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == "worker" && l.GetValue() == w.Name
		}) {
			t.Errorf("jobferry_build_info of %s's worker binary: %v, want it labelled worker=%q", w.Name, info, w.Name)
		}

		controller := v1alpha1.JobControllerBuiltin
		if w.Name == "worker-2" {
			controller = v1alpha1.JobControllerWorker
		}
		joinWorker(ctx, t, userKubeconfig, managerClient, w.Name, controller)
		c, err := kubernetes.NewForConfig(w.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		workers[w.Name] = c
	}
	if err := devenv.WaitConnected(ctx, managerClient, len(env.Workers), time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, w := range env.Workers {
		if cond := installedCondition(ctx, t, managerClient, w.Name, v1alpha1.ConditionAuthorized); cond.Status != metav1.ConditionTrue {
			t.Fatalf("%s: Authorized=%s (%s): the worker chart's identity lacks rights the manager needs", w.Name, cond.Status, cond.Message)
		}
	}

	d := &dispatchEnv{Env: &devenv.Env{Environment: env}, manager: admin, managerClient: managerClient, workers: workers}
	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	optedIn := func() string { return d.optedInNamespace(ctx, t) }
	complete := func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil }

	t.Run("200-jobs-while-tokens-renew", func(t *testing.T) {
		ns := optedIn()
		renewalsBefore := map[string]int{}
		for _, w := range env.Workers {
			renewalsBefore[w.Name] = tokens.count(w.Name + "-kubeconfig")
		}
		// 15 s each, so all 200 run at once and the run spans several
		// renewals.
		const n = 200
		for i := range n {
			if _, err := admin.BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, fmt.Sprintf("job-%03d", i), 15*time.Second), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitAllComplete(ctx, t, d, ns, n, 5*time.Minute)
		for _, w := range env.Workers {
			renewed := tokens.count(w.Name+"-kubeconfig") - renewalsBefore[w.Name]
			t.Logf("%s: %d renewals while the Jobs ran (token lifetime 10m, renewed after 6s)", w.Name, renewed)
			if renewed < 2 {
				t.Errorf("%s: %d token renewals while the Jobs ran, want at least 2", w.Name, renewed)
			}
		}
		checkRanOnce(ctx, t, admin, env, ns, n)
		families := scrapeVerifiedFamilies(ctx, t, admin, devenv.SystemNamespace, "jobferry-manager-webhook-cert", "jobferry-manager-metrics."+devenv.SystemNamespace+".svc", metricsURL)
		assertCounterZero(t, families, "jobferry_status_write_rejected_total")
		for _, m := range families["jobferry_workercluster_credential_renewals_total"].GetMetric() {
			if labelValue(m, "result") == "failed" && m.GetCounter().GetValue() != 0 {
				t.Errorf("jobferry_workercluster_credential_renewals_total%v = %v", m.Label, m.GetCounter().GetValue())
			}
		}
		for _, w := range env.Workers {
			checkCredentialStatus(ctx, t, managerClient, families, w.Name)
			if tokens.unchanged[w.Name+"-kubeconfig"] != 0 {
				t.Errorf("%s: %d writes of its Secret kept the token", w.Name, tokens.unchanged[w.Name+"-kubeconfig"])
			}
		}
	})
	t.Run("plugin", func(t *testing.T) {
		checkPlugin(ctx, t, d, userKubeconfig, optedIn())
	})
	t.Run("inspection-as-a-tenant", func(t *testing.T) {
		checkInspectionAsTenant(ctx, t, d, userKubeconfig, workers)
	})
	t.Run("kueue", func(t *testing.T) {
		// Kueue's objects as its administrator makes them; jobferry's
		// identity keeps its check Active, reads the Workload and applies
		// its check Ready.
		checkKueueMode(ctx, t, env.Manager.RESTConfig(), admin, optedIn())
	})
	t.Run("dispatch", func(t *testing.T) {
		ns := optedIn()
		for _, worker := range []string{"worker-1", "worker-2"} {
			job := sleepJob(ns, "to-"+worker, time.Second)
			d.dispatchTo(ctx, t, job, worker)
			pollJob(ctx, t, admin, ns, job.Name, time.Minute, "Complete", complete)
		}
		deleteJobsWaitNoMirrors(ctx, t, d, ns)
	})
	// A Warning the worker records about a mirror's pod (its UID, as the
	// kubelet and the scheduler write it) reaches the manager Job: the
	// manager's identity reads the pod to check it is the mirror's.
	t.Run("pod-warning", func(t *testing.T) {
		ns := optedIn()
		job := sleepJob(ns, "warned", time.Hour)
		worker := d.dispatchTo(ctx, t, job, "worker-1")
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		pods := jobPods(ctx, t, worker, ns, job.Name)
		if len(pods) != 1 {
			t.Fatalf("%d pods of the mirror, want 1", len(pods))
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "kubelet-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pods[0].Name, UID: pods[0].UID},
			Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container",
		}
		if _, err := worker.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(ctx, t, admin, ns, job.Name, "BackOff", 30*time.Second, "worker worker-1, pod "+ns+"/"+pods[0].Name)
		deleteJobsWaitNoMirrors(ctx, t, d, ns)
	})
	t.Run("suspend-and-resume", func(t *testing.T) {
		ns := optedIn()
		job := sleepJob(ns, "pausable", 4*time.Second)
		worker := d.dispatchTo(ctx, t, job, "worker-2")
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		mergePatchJob(ctx, t, admin, ns, job.Name, `{"spec":{"suspend":true}}`)
		pollJob(ctx, t, worker, ns, job.Name, 30*time.Second, "mirror suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
		pollJob(ctx, t, admin, ns, job.Name, 30*time.Second, "Suspended", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobSuspended) != nil })
		mergePatchJob(ctx, t, admin, ns, job.Name, `{"spec":{"suspend":false}}`)
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "Complete", complete)
	})
	t.Run("pod-security-follows-the-manager", func(t *testing.T) {
		// An administrator tightens the manager namespace's Pod Security
		// after jobferry created its namespace on worker-1: the next Job
		// still goes there, the namespace relabelled first (patch, within
		// the worker chart's admission policy), and the manager's identity
		// can change no namespace it did not create.
		ns := optedIn()
		d.dispatchTo(ctx, t, restrictedJob(ns, "before"), "worker-1")
		pollJob(ctx, t, admin, ns, "before", time.Minute, "Complete", complete)
		created, err := workers["worker-1"].CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Labels[v1alpha1.ManagerIDLabel] == "" || created.Labels[psaEnforce] != "" {
			t.Fatalf("namespace %s as jobferry created it on worker-1: labels %v, want its manager's ID and no Pod Security level", ns, created.Labels)
		}
		if _, err := admin.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+psaEnforce+`":"restricted"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		d.dispatchTo(ctx, t, restrictedJob(ns, "after"), "worker-1")
		pollJob(ctx, t, admin, ns, "after", time.Minute, "Complete", complete)
		relabelled, err := workers["worker-1"].CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if relabelled.Labels[psaEnforce] != "restricted" || relabelled.Labels[v1alpha1.ManagerIDLabel] != created.Labels[v1alpha1.ManagerIDLabel] {
			t.Errorf("namespace %s on worker-1 after the manager's was tightened: labels %v, want enforce restricted and the same manager ID", ns, relabelled.Labels)
		}
		identity := impersonate(t, env.Workers[0].RESTConfig(), "system:serviceaccount:"+devenv.SystemNamespace+":jobferry-manager", "system:serviceaccounts")
		for _, target := range []string{"kube-system", "default"} {
			_, err := identity.CoreV1().Namespaces().Patch(ctx, target, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+psaEnforce+`":"privileged"}}}`), metav1.PatchOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may change only the namespaces it created") {
				t.Errorf("the manager's identity relabelling %s on worker-1: %v, want it refused by the chart's admission policy", target, err)
			}
		}
		_, err = identity.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`), metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may change only the Pod Security labels") {
			t.Errorf("the manager's identity labelling %s on worker-1: %v, want it refused by the chart's admission policy", ns, err)
		}
		// Nor can its token run a Job as a system namespace's, the worker
		// chart's or another team's ServiceAccount: RBAC grants Jobs
		// everywhere, the chart's policy narrows it.
		for target, want := range map[string]string{
			"kube-system":          "may not write Jobs in namespace kube-system: the kube-* namespaces and the namespace of its own identity are out of its reach",
			devenv.SystemNamespace: "may not write Jobs in namespace " + devenv.SystemNamespace,
			"default":              "may write Jobs only in the namespaces it created (labelled jobferry.dev/manager-id), that their administrator accepted its Jobs in (labelled accepts-manager.jobferry.dev/<its ID>=true) or that the worker chart lists: namespace default is none of them",
		} {
			_, err := identity.BatchV1().Jobs(target).Create(ctx, sleepJob(target, "escalate", time.Second), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("the manager's identity creating a Job in %s on worker-1: %v, want it refused by the chart's admission policy saying %q", target, err, want)
			} else {
				t.Logf("refused: %v", err)
			}
		}
		// Nor delete a namespace it did not create, or its own.
		for _, target := range []string{devenv.SystemNamespace, "kube-node-lease"} {
			err := identity.CoreV1().Namespaces().Delete(ctx, target, metav1.DeleteOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may delete only the namespaces it created") {
				t.Errorf("the manager's identity deleting namespace %s on worker-1: %v, want it refused by the chart's admission policy", target, err)
			}
		}
		// The manager's namespace deleted once its Jobs are: the one
		// jobferry created on worker-1 goes too, after the grace (5 s).
		deleteJobsWaitNoMirrors(ctx, t, d, ns)
		if err := admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := workers["worker-1"].CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Errorf("namespace %s jobferry created on worker-1 still there 2 minutes after the manager's was deleted: %v", ns, err)
		}
	})
	t.Run("another-teams-namespace", func(t *testing.T) {
		// Another team's namespace of the same name on worker-1, made by
		// its administrator, with a ServiceAccount of theirs: a tenant's
		// Job naming that ServiceAccount is never placed there, and says
		// why on the Job, in its Event and in describe; once the
		// administrator accepts the manager's Jobs there, it runs.
		ns := optedIn()
		if _, err := workers["worker-1"].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := workers["worker-1"].CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The tenant's own namespace on the manager has a ServiceAccount
		// of that name too: the manager's admission checks it exists
		// there, as a single cluster would.
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		id := managerID(ctx, t, managerClient, devenv.SystemNamespace)
		job := sleepJob(ns, "borrowed", time.Second)
		job.Spec.Template.Spec.ServiceAccountName = "deployer"
		job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
		if _, err := admin.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		why := "namespace " + ns + " there was not created by jobferry and its administrator has not accepted this manager's Jobs in it"
		e := waitEvent(ctx, t, admin, ns, job.Name, "Unschedulable", 30*time.Second, "worker-1: "+why, "kubectl label namespace "+ns+" accepts-manager.jobferry.dev/"+id+"=true, on the worker")
		t.Logf("Unschedulable: %s", e.Message)
		described := mustPlugin(ctx, t, userKubeconfig, "describe", "job", job.Name, "-n", ns)
		if !containsAll(described, why) {
			t.Errorf("describe of a Job held back from another team's namespace does not say why:\n%s", described)
		}
		if _, err := workers["worker-1"].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a mirror in another team's namespace on worker-1: %v", err)
		}
		if _, err := workers["worker-1"].CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+v1alpha1.AcceptsManagerLabel(id)+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		pollJob(ctx, t, admin, ns, job.Name, 2*time.Minute, "Complete once its namespace there accepts the manager's Jobs", complete)
		deleteJobsWaitNoMirrors(ctx, t, d, ns)
	})
	t.Run("name-conflict", func(t *testing.T) {
		// The manager tells a same-named Job of someone else's from its own
		// mirror with a get after the create was refused.
		ns := optedIn()
		acceptingNamespace(ctx, t, workers["worker-1"], ns, managerID(ctx, t, managerClient, devenv.SystemNamespace), nil)
		if _, err := workers["worker-1"].BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, "clash", time.Hour), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		job := sleepJob(ns, "clash", time.Second)
		job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
		if _, err := admin.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(ctx, t, admin, ns, job.Name, "NameConflict", 30*time.Second, "left untouched")
		// Pinned to the one worker it may not use, it waits and says so.
		waitEventCount(ctx, t, admin, ns, job.Name, "Unschedulable", 1, time.Minute)
		// A capacity change leaves it waiting where it is: a change wakes
		// only the waiting Jobs that fit now (manager/jobs/waitingroom.go, whose unit tests
		// count the retries), and this one fits nowhere until its user
		// changes it. The pods of a Job created on worker-2 directly change
		// worker-2's summary; once the manager shows it, the wake-up it
		// triggered is over, and this Job, its own signals say, is still
		// unplaced, waiting for the same reason, with its one Unschedulable
		// Event and nothing on worker-2. (A cluster-wide counter of
		// placements would also count the Job's own reconciles after its
		// release, which land when they will.)
		scrape := func() map[string]*dto.MetricFamily {
			return scrapeVerifiedFamilies(ctx, t, admin, devenv.SystemNamespace, "jobferry-manager-webhook-cert", "jobferry-manager-metrics."+devenv.SystemNamespace+".svc", metricsURL)
		}
		requested := func(families map[string]*dto.MetricFamily) float64 {
			return metricSum(families["jobferry_workercluster_pool_requested"], map[string]string{"worker": "worker-2", "resource": "pods"})
		}
		families := scrape()
		requestedBefore := requested(families)
		if _, err := workers["worker-2"].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := workers["worker-2"].BatchV1().Jobs(ns).Create(ctx, sleepJob(ns, "capacity-change", time.Hour), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			families = scrape()
			return requested(families) > requestedBefore, nil
		}); err != nil {
			t.Fatalf("the manager never showed worker-2's new pod in jobferry_workercluster_pool_requested: %v", err)
		}
		waiting, err := admin.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := suspendedCondition(waiting); waiting.Annotations[v1alpha1.WorkerAnnotation] != "" || c == nil || c.Reason != policy.ReasonNoWorkerFits ||
			!strings.Contains(c.Message, "worker-1: a Job "+ns+"/clash not created by jobferry exists there") {
			t.Errorf("after worker-2's capacity changed: placed on %q, Suspended condition %+v; want it waiting, unplaced, for the name held on worker-1",
				waiting.Annotations[v1alpha1.WorkerAnnotation], c)
		}
		assertEventCount(ctx, t, admin, ns, job.Name, "Unschedulable", 1)
		if _, err := workers["worker-2"].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("the Job pinned to worker-1 has a mirror on worker-2")
		}
	})
	t.Run("delete-running", func(t *testing.T) {
		ns := optedIn()
		job := sleepJob(ns, "deleted", time.Hour)
		worker := d.dispatchTo(ctx, t, job, "worker-1")
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		if err := admin.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(ctx, t, worker, ns, job.Name)
	})
	t.Run("cordon", func(t *testing.T) {
		setCordoned(ctx, t, managerClient, "worker-1", true)
		defer setCordoned(ctx, t, managerClient, "worker-1", false)
		ns := optedIn()
		job := sleepJob(ns, "cordoned", time.Second)
		placed, _ := dispatchOne(ctx, t, d, job)
		if placed != "worker-2" {
			t.Errorf("placed on cordoned %s", placed)
		}
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "Complete", complete)
	})
	t.Run("orphan-collection", func(t *testing.T) {
		ns := optedIn()
		job := sleepJob(ns, "orphan", time.Hour)
		worker := d.dispatchTo(ctx, t, job, "worker-1")
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		restore := cutOff(ctx, t, managerClient, "worker-1")
		waitWorkerCondition(ctx, t, managerClient, "worker-1", v1alpha1.ConditionConnected, metav1.ConditionFalse, 2*time.Minute)
		if err := admin.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		restore()
		waitGone(ctx, t, worker, ns, job.Name)
	})
	t.Run("worker-loss", func(t *testing.T) {
		ns := optedIn()
		job := sleepJob(ns, "survivor", 30*time.Second)
		d.dispatchTo(ctx, t, job, "worker-2")
		// Unpinned from here on, so it may run elsewhere once worker-2 is lost.
		mergePatchJob(ctx, t, admin, ns, job.Name, `{"metadata":{"annotations":{"`+v1alpha1.ClusterSelectorAnnotation+`":null}}}`)
		pollJob(ctx, t, admin, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		lost := env.Workers[1]
		if err := lost.StopComponent("kube-apiserver"); err != nil {
			t.Fatal(err)
		}
		moved := pollJob(ctx, t, admin, ns, job.Name, 2*time.Minute, "placed again on worker-1", func(j *batchv1.Job) bool {
			return j.Annotations[v1alpha1.WorkerAnnotation] == "worker-1"
		})
		if _, err := lost.RestartComponent("kube-apiserver"); err != nil {
			t.Fatal(err)
		}
		waitWorkerCondition(ctx, t, managerClient, "worker-2", v1alpha1.ConditionConnected, metav1.ConditionTrue, 2*time.Minute)
		// The worker binary lost its leader lease with its API server and
		// exited, as it should; its Deployment would start it again.
		p, err := lost.RestartComponent("jobferry-worker")
		if err != nil {
			t.Fatal(err)
		}
		waitReady(ctx, t, p, workerProbes[lost.Name])
		// The stale attempt left on worker-2 is deleted once it is back.
		waitGone(ctx, t, workers["worker-2"], ns, job.Name)
		t.Logf("re-dispatched as attempt %s", moved.Annotations[v1alpha1.DispatchAttemptAnnotation])
		pollJob(ctx, t, admin, ns, job.Name, 2*time.Minute, "Complete", complete)
	})
	if t.Failed() {
		return
	}

	// The worker chart grants the same on every worker; the flows use them
	// across the workers.
	var identityEvents []auditEvent
	for _, w := range env.Workers {
		identityEvents = append(identityEvents, readAudit(t, w, "system:serviceaccount:"+ns+":jobferry-manager")...)
		// The worker binary's own rights are generated from its markers;
		// here only none may be missing.
		checkLeastPrivilege(t, "the worker binary on "+w.Name,
			grantsTo(t, workerObjects[w.Name], ns, "jobferry-worker"), readAudit(t, w, "system:serviceaccount:"+ns+":jobferry-worker"), false)
	}
	checkLeastPrivilege(t, "the manager's identity on the workers", grantsTo(t, workerObjects["worker-1"], ns, "jobferry-manager"), identityEvents, true)

	// A renewal the worker refuses (the chart's token RoleBinding removed):
	// the condition says CredentialExpiring with the worker's message and a
	// Warning Event is recorded, while Jobs go on with the current token;
	// with the binding back the next renewal succeeds.
	t.Run("renewal-refused-then-granted", func(t *testing.T) {
		var binding rbacv1.RoleBinding
		for _, obj := range workerObjects["worker-1"] {
			if name, _ := obj["metadata"].(map[string]any)["name"].(string); obj["kind"] == "RoleBinding" && strings.HasSuffix(name, "-manager-token") {
				decodeInto(t, obj, &binding)
			}
		}
		if binding.Name == "" {
			t.Fatal("the worker chart renders no RoleBinding for the manager's token")
		}
		if err := workers["worker-1"].RbacV1().RoleBindings(ns).Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cond := waitWorkerCondition(ctx, t, managerClient, "worker-1", v1alpha1.ConditionCredentialRenewal, metav1.ConditionFalse, time.Minute)
		if cond.Reason != v1alpha1.ReasonCredentialExpiring || !containsAll(cond.Message, "renewing the token failed", "forbidden", "Jobs continue on it") {
			t.Errorf("CredentialRenewal %s: %s", cond.Reason, cond.Message)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			events, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=worker-1,reason=" + managerworkers.ReasonCredentialRenewalFailed})
			return err == nil && len(events.Items) > 0 && events.Items[0].Type == corev1.EventTypeWarning, err
		})
		if err != nil {
			t.Errorf("no Warning Event %s on WorkerCluster worker-1: %v", managerworkers.ReasonCredentialRenewalFailed, err)
		}
		// The next attempt, refused the same way, counts in the same Event
		// (a series: the manager's one use of its right to patch Events).
		waitEventCount(ctx, t, admin, metav1.NamespaceDefault, "worker-1", managerworkers.ReasonCredentialRenewalFailed, 2, time.Minute)
		job := sleepJob(optedIn(), "while-renewal-fails", time.Second)
		d.dispatchTo(ctx, t, job, "worker-1")
		pollJob(ctx, t, admin, job.Namespace, job.Name, time.Minute, "Complete", complete)

		before := tokens.count("worker-1-kubeconfig")
		binding.ResourceVersion, binding.UID = "", ""
		if _, err := workers["worker-1"].RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitWorkerCondition(ctx, t, managerClient, "worker-1", v1alpha1.ConditionCredentialRenewal, metav1.ConditionTrue, time.Minute)
		if tokens.count("worker-1-kubeconfig") <= before {
			t.Error("the credential is valid again but its token was not renewed")
		}
	})
	// On the manager cluster every flow so far, the refused renewal's
	// repeated Event included, has used the manager's rights.
	checkLeastPrivilege(t, "the manager's ServiceAccount on the manager cluster",
		grantsTo(t, managerObjects, ns, "jobferry-manager"), readAudit(t, env.Manager, "system:serviceaccount:"+ns+":jobferry-manager"), true)

	// The worker chart's namespaced mode: worker-2's identity gets Roles in
	// team-x only; its WorkerCluster lists team-x. A Job from team-x runs
	// there (its namespace is never created: the administrator made it and
	// accepted the manager's Jobs in it);
	// one from elsewhere is not placed there, its Event saying why.
	t.Run("namespaced-worker", func(t *testing.T) {
		worker2 := env.Workers[1]
		acceptingNamespace(ctx, t, workers["worker-2"], "team-x", managerID(ctx, t, managerClient, devenv.SystemNamespace), nil)
		helm(ctx, t, worker2.KubeconfigPath, "upgrade", "jobferry-worker", "charts/jobferry-worker", "-n", ns, "--set", "managerIdentity.namespaces={team-x}")
		objects := manifestObjects(t, helm(ctx, t, worker2.KubeconfigPath, "get", "manifest", "jobferry-worker", "-n", ns))
		// Joining again picks the namespaces up from the chart's
		// ServiceAccount; the WorkerCluster keeps everything else.
		joinWorker(ctx, t, userKubeconfig, managerClient, "worker-2", "")
		wc := &v1alpha1.WorkerCluster{}
		if err := managerClient.Get(ctx, client.ObjectKey{Name: "worker-2"}, wc); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(wc.Spec.Namespaces, []string{"team-x"}) || wc.Spec.JobController != v1alpha1.JobControllerWorker || wc.Labels[workerNameLabel] != "worker-2" {
			t.Fatalf("joined again, worker-2 has namespaces %q, Job controller %s, labels %v", wc.Spec.Namespaces, wc.Spec.JobController, wc.Labels)
		}

		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x",
			Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		inside := sleepJob("team-x", "inside", time.Second)
		d.dispatchTo(ctx, t, inside, "worker-2")
		pollJob(ctx, t, admin, "team-x", inside.Name, time.Minute, "Complete", complete)

		outsideNS := optedIn()
		outside := sleepJob(outsideNS, "outside", time.Second)
		outside.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-2"}
		if _, err := admin.BatchV1().Jobs(outsideNS).Create(ctx, outside, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e := waitEvent(ctx, t, admin, outsideNS, outside.Name, "Unschedulable", 30*time.Second, "worker-2: the manager may use only namespaces team-x there")
		t.Logf("Unschedulable: %s", e.Message)
		for _, ev := range readAudit(t, worker2, "system:serviceaccount:"+ns+":jobferry-manager") {
			if ev.Received.After(before) && ev.Verb == "create" && ev.resource() == "namespaces" {
				t.Errorf("the manager tried to create a namespace on a namespaced worker: %s (code %d)", ev.RequestURI, ev.ResponseStatus.Code)
			}
		}
		checkLeastPrivilege(t, "the manager's namespaced identity on worker-2", grantsTo(t, objects, ns, "jobferry-manager"),
			sinceNamespacedConnection(t, readAudit(t, worker2, "system:serviceaccount:"+ns+":jobferry-manager"), "team-x"), false)
		// Without managerIdentity.allowInspection (the upgrade dropped it;
		// checked after the audit, as the refusals here are the point),
		// describe shows the manager side and names the value to set.
		held := sleepJob("team-x", "held", time.Hour)
		d.dispatchTo(ctx, t, held, "worker-2")
		pollJob(ctx, t, admin, "team-x", held.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
		described := mustPlugin(ctx, t, userKubeconfig, "describe", "job", held.Name, "-n", "team-x")
		if !containsAll(described, "Worker:       worker-2", "install the worker chart with --set managerIdentity.allowInspection=true") {
			t.Errorf("describe without the inspection rights:\n%s", described)
		}
		if out, err := plugin(ctx, t, userKubeconfig, "logs", "job", held.Name, "-n", "team-x"); err == nil || !strings.Contains(out, "managerIdentity.allowInspection=true") {
			t.Errorf("logs without the inspection rights: %v\n%s", err, out)
		}
	})
}

// scrapeVerified reads a metrics endpoint over HTTPS, verifying its
// certificate against the CA of the Secret for serverName, and expects
// jobferry's metrics there.
func scrapeVerified(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, secret, serverName, url string) {
	t.Helper()
	if _, ok := scrapeVerifiedFamilies(ctx, t, c, ns, secret, serverName, url)["jobferry_jobs"]; !ok {
		t.Fatalf("%s serves no jobferry_jobs", url)
	}
}

// checkBudgetWebhookAnswers: the chart's budget webhook is reached (it
// fails open, so only its refusal shows it): an update taking job past what
// the manager keeps of one is refused in its words.
func checkBudgetWebhookAnswers(ctx context.Context, t *testing.T, c kubernetes.Interface, job *batchv1.Job) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		grown, err := c.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if grown.Labels == nil {
			grown.Labels = map[string]string{}
		}
		for i := range 2100 {
			grown.Labels[fmt.Sprintf("example.com/l-%04d", i)] = "x"
		}
		_, err = c.BatchV1().Jobs(job.Namespace).Update(ctx, grown, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && time.Now().Before(deadline) {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), `admission webhook "budget.jobferry.dev" denied the request: budget: this change would make the Job hold more than jobferry keeps of one`) {
			t.Fatalf("an update taking %s/%s past the budget: %v; want the chart's budget webhook's refusal", job.Namespace, job.Name, err)
		}
		return
	}
}

// pointWebhooksAt makes both webhook configurations call url instead of the
// chart's Service, which has no pods here.
func pointWebhooksAt(ctx context.Context, t *testing.T, c kubernetes.Interface, url string) {
	t.Helper()
	mutating, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "jobferry-manager-opt-in", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + *pathOf(mutating.Webhooks[i].ClientConfig))}
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mutating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	validating, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "jobferry-manager-validate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + *pathOf(validating.Webhooks[i].ClientConfig))}
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, validating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func pathOf(cc admissionregistrationv1.WebhookClientConfig) *string {
	if cc.Service != nil && cc.Service.Path != nil {
		return cc.Service.Path
	}
	return ptr.To("")
}

func caBundleOf(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) []byte {
	t.Helper()
	if m, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return m.Webhooks[0].ClientConfig.CABundle
	}
	v, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v.Webhooks[0].ClientConfig.CABundle
}

func installedCondition(ctx context.Context, t *testing.T, c client.Client, worker, condType string) metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(wc.Status.Conditions, condType)
		return cond != nil, nil
	})
	if err != nil {
		t.Fatalf("%s has no %s condition: %v", worker, condType, err)
	}
	return *cond
}

func setCordoned(ctx context.Context, t *testing.T, c client.Client, worker string, cordoned bool) {
	t.Helper()
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: worker}}
	patch := []byte(fmt.Sprintf(`{"spec":{"cordoned":%t}}`, cordoned))
	if err := c.Patch(ctx, wc, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// cutOff points a worker's kubeconfig Secret at a closed port, as a network
// partition would, and returns what restores it.
func cutOff(ctx context.Context, t *testing.T, c client.Client, worker string) func() {
	t.Helper()
	key := client.ObjectKey{Namespace: devenv.SystemNamespace, Name: worker + "-kubeconfig"}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	good := secret.Data["kubeconfig"]
	cfg, err := clientcmd.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server = "https://127.0.0.1:1"
	cut, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	set := func(data []byte) {
		s := &corev1.Secret{}
		if err := c.Get(context.Background(), key, s); err != nil {
			t.Fatal(err)
		}
		s.Data["kubeconfig"] = data
		if err := c.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	set(cut)
	return func() { set(good) }
}

// waitGone waits until the Job is gone from a cluster.
func waitGone(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s is still there: %v", ns, name, err)
	}
}

// waitEventCount waits until the Job's Events of a reason count n in all.
// sinceNamespacedConnection keeps the audit events from the manager's first
// read of mirrors in namespace ns on: between the chart upgrade that narrows
// its identity and the join that tells the manager, its cluster-wide watches
// restart now and then and are refused — expected, and not what the
// namespaced mode's least privilege is about.
func sinceNamespacedConnection(t *testing.T, events []auditEvent, ns string) []auditEvent {
	t.Helper()
	for i, e := range events {
		if e.Verb == "list" && e.resource() == "jobs" && e.ObjectRef.Namespace == ns {
			return events[i:]
		}
	}
	t.Fatalf("the manager never listed the Jobs of %s on the namespaced worker", ns)
	return nil
}

func waitEventCount(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, job, reason string, n int32, timeout time.Duration) {
	t.Helper()
	var count int32
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		count, err = eventCount(ctx, c, ns, job, reason)
		return count >= n, err
	})
	if err != nil {
		t.Fatalf("%d %s Events on %s/%s, want %d: %v", count, reason, ns, job, n, err)
	}
}

// assertEventCount fails unless exactly n Events of reason were recorded on
// the Job (a series counts its repetitions).
func assertEventCount(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, job, reason string, n int32) {
	t.Helper()
	count, err := eventCount(ctx, c, ns, job, reason)
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Errorf("%d %s Events on %s/%s, want %d", count, reason, ns, job, n)
	}
}

func eventCount(ctx context.Context, c kubernetes.Interface, ns, job, reason string) (int32, error) {
	events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
	if err != nil {
		return 0, err
	}
	var count int32
	for _, e := range events.Items {
		if e.Reason == reason {
			count += max(e.Count, 1)
			if e.Series != nil {
				count = max(count, e.Series.Count)
			}
		}
	}
	return count, nil
}
