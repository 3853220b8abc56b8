//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// Chart settings of the real-node tier: a short lease, so a killed leader
// is replaced soon.
const (
	realLeaseDuration = 6 * time.Second
	realRetryPeriod   = time.Second
)

// The real-node tier: a manager and two workers, each cluster with one real
// node (kubelet, kube-proxy, containerd, runc) and a local registry. The
// release of `make release-e2e` is published to the registry with `make
// publish`; the charts are installed from it with the real helm (one worker's
// with helm 4), their Deployments running as pods of the images the nodes
// pull from it (the manager as two replicas); the workers are joined with the
// release's `kubectl jobferry join`; Jobs run real containers. One
// environment for every check.
func TestRealNodes(t *testing.T) {
	ctx := t.Context()
	bin, release := realNodeTier(t)
	dir := outputDir(t)
	env := startRealNodeTier(ctx, t, dir, bin)

	const ns = devenv.SystemNamespace
	admin, err := kubernetes.NewForConfig(env.Manager.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	managerClient, err := client.New(env.Manager.RESTConfig(), client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Published to the environment's registry as a platform team does
	// (make publish, with the credentials `docker login` writes); every
	// chart installed from it (one worker's with helm 4) and every image
	// pulled from it.
	installed := time.Now()
	inst, err := devenv.InstallRelease(ctx, env, bin, devenv.InstallOptions{
		Release:      release,
		WorkerValues: []string{"--set", "managerIdentity.allowNamespaceCreation=true", "--set", "managerIdentity.allowInspection=true"},
		WorkerHelm: func(i int) string {
			if i == 1 {
				return "helm4"
			}
			return "helm"
		},
		ManagerValues: append([]string{
			"--set", "leaderElection.leaseDuration=" + realLeaseDuration.String(), "--set", "leaderElection.renewDeadline=4s",
			"--set", "leaderElection.retryPeriod=" + realRetryPeriod.String(),
			"--set", "dispatch.workerHealthInterval=2s"}, metricsReaderValues(ns)...),
		Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published and installed in %s", time.Since(installed).Round(time.Second))
	registry := inst.Registry
	workerObjects := map[string][]map[string]any{}
	workers := map[string]kubernetes.Interface{}
	for _, w := range env.Workers {
		workerObjects[w.Name] = manifestObjects(t, helm(ctx, t, w.KubeconfigPath, "get", "manifest", devenv.WorkerRelease, "-n", ns))
		c, err := kubernetes.NewForConfig(w.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		workers[w.Name] = c
	}
	managerObjects := manifestObjects(t, helm(ctx, t, env.Manager.KubeconfigPath, "get", "manifest", devenv.ManagerRelease, "-n", ns))

	d := &dispatchEnv{Env: &devenv.Env{Environment: env}, manager: admin, managerClient: managerClient, workers: workers}
	optedIn := func() string { return d.optedInNamespace(ctx, t) }

	// The Deployment is Ready: the webhook answers through its Service
	// (the API server routes to a ready pod's address) from the first Job
	// on, with no retry.
	firstNS := optedIn()
	first, err := admin.BatchV1().Jobs(firstNS).Create(ctx, realJob(firstNS, "first", "echo first"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the first Job once the manager's Deployment was Ready: %v", err)
	}
	if ptr.Deref(first.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy {
		t.Fatalf("the first Job once the manager's Deployment was Ready was not opted in: managedBy %v", first.Spec.ManagedBy)
	}
	managerPods := runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
	wantImage := registry + "/jobferry-manager:" + release.Version
	pulled := 0
	for _, p := range managerPods {
		if p.Spec.NodeName != "manager-node" || p.Spec.Containers[0].Image != wantImage {
			t.Errorf("manager pod %s: node %q, image %q; want the manager's real node and %s", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image, wantImage)
		}
		if checkPulledFrom(ctx, t, admin, p, wantImage) {
			pulled++
			t.Logf("the manager pod %s's Events:\n%s", p.Name, kubectl(ctx, t, env.Manager.KubeconfigPath, "get", "events", "-n", ns,
				"--field-selector", "involvedObject.name="+p.Name, "-o", "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message"))
		}
	}
	if pulled == 0 {
		t.Errorf("no manager pod pulled %s from the registry", wantImage)
	}
	t.Logf("the manager cluster's pods:\n%s", kubectl(ctx, t, env.Manager.KubeconfigPath, "get", "pods", "-A", "-o", "wide"))

	// The user's plugin is the release's, from its archive.
	userKubeconfig := inst.Kubeconfig
	usePlugin(userKubeconfig, inst.Plugin)
	joinWorker(ctx, t, userKubeconfig, managerClient, "worker-1", "")
	joinWorker(ctx, t, userKubeconfig, managerClient, "worker-2", v1alpha1.JobControllerWorker)
	if err := devenv.WaitConnected(ctx, managerClient, len(env.Workers), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	complete := func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil }
	pollJob(ctx, t, admin, firstNS, "first", 2*time.Minute, "Complete", complete)

	t.Run("real-container-output-through-the-manager", func(t *testing.T) {
		ns := optedIn()
		for _, worker := range []string{"worker-1", "worker-2"} {
			name := "hello-" + worker
			d.dispatchTo(ctx, t, realJob(ns, name, `echo "real output of `+name+` from $(hostname)"`), worker)
			pollJob(ctx, t, admin, ns, name, 2*time.Minute, "Complete", complete)
			out := mustPlugin(ctx, t, userKubeconfig, "logs", "job", name, "-n", ns)
			if !strings.Contains(out, "real output of "+name+" from ") {
				t.Errorf("kubectl jobferry logs job %s printed %q, want the line its container printed", name, out)
			}
			t.Logf("kubectl jobferry logs job %s -n %s: %s", name, ns, strings.TrimSpace(out))
		}
	})

	t.Run("pods-resolve-services-by-name", func(t *testing.T) {
		// Each real node's cluster DNS answers for its cluster's Services,
		// and the kubelet warns of no missing one.
		ns := optedIn()
		for _, worker := range []string{"worker-1", "worker-2"} {
			name := "dns-" + worker
			c := d.dispatchTo(ctx, t, realJob(ns, name, "nslookup kubernetes.default.svc."+localcluster.ClusterDomain), worker)
			pollJob(ctx, t, admin, ns, name, 2*time.Minute, "Complete", complete)
			svc, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out := mustPlugin(ctx, t, userKubeconfig, "logs", "job", name, "-n", ns)
			if !strings.Contains(out, "Address: "+svc.Spec.ClusterIP) {
				t.Errorf("nslookup of the kubernetes Service on %s printed %q, want its ClusterIP %s", worker, out, svc.Spec.ClusterIP)
			}
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("the pod of %s on %s: %v, %d pods", name, worker, err, len(pods.Items))
			}
			events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pods.Items[0].Name})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Reason == "MissingClusterDNS" {
					t.Errorf("the pod %s on %s: %s: %s", pods.Items[0].Name, worker, e.Reason, e.Message)
				}
			}
			t.Logf("%s: %s", name, strings.Join(strings.Fields(out), " "))
		}
	})

	t.Run("a-failing-container-reaches-the-manager-job", func(t *testing.T) {
		ns := optedIn()
		for _, worker := range []string{"worker-1", "worker-2"} {
			name := "exit-3-" + worker
			job := realJob(ns, name, "echo failing on purpose; exit 3")
			job.Spec.BackoffLimit = ptr.To[int32](0)
			job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}},
			}}}
			d.dispatchTo(ctx, t, job, worker)
			failed := pollJob(ctx, t, admin, ns, name, 2*time.Minute, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed) != nil })
			c := hasCondition(failed, batchv1.JobFailed)
			if c.Reason != batchv1.JobReasonPodFailurePolicy || !strings.Contains(c.Message, "exit code 3") {
				t.Errorf("%s on %s: Failed condition %q: %q; want the worker's PodFailurePolicy and the container's exit code 3", name, worker, c.Reason, c.Message)
			}
		}
	})

	t.Run("metrics-through-the-service-verified-with-the-chart-ca", func(t *testing.T) {
		// As a ServiceMonitor scrapes: every endpoint of the metrics
		// Service, over HTTPS verified for the Service's name with the CA
		// in the certificate Secret.
		for _, addr := range serviceEndpoints(ctx, t, admin, ns, "jobferry-manager-metrics", 2) {
			scrapeVerified(ctx, t, admin, ns, "jobferry-manager-webhook-cert", "jobferry-manager-metrics."+ns+".svc", "https://"+addr+"/metrics")
		}
	})

	t.Run("version-of-the-manager-pods", func(t *testing.T) {
		// The release's plugin names the release's version, and the
		// manager pods' (the chart's appVersion on each) with their image.
		var report struct {
			Client  struct{ Version string }
			Manager []struct{ Pod, Version, Image string }
		}
		out := mustPlugin(ctx, t, userKubeconfig, "version", "-o", "json", "--jobferry-namespace", ns)
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("version -o json: %v\n%s", err, out)
		}
		if len(report.Manager) != 2 {
			t.Fatalf("version shows %d manager pods, the chart runs 2:\n%s", len(report.Manager), out)
		}
		for _, p := range report.Manager {
			if p.Version != report.Client.Version || !strings.HasSuffix(p.Image, ":"+p.Version) {
				t.Errorf("manager pod %s: version %q, image %q; the release is %q", p.Pod, p.Version, p.Image, report.Client.Version)
			}
		}
	})

	t.Run("the-manager-runs-as-the-chart-service-account", func(t *testing.T) {
		// Every write to Jobs on the manager cluster but the test's own is
		// the chart's ServiceAccount's: the pods' in-cluster identity.
		identity := "system:serviceaccount:" + ns + ":jobferry-manager"
		events := readAudit(t, env.Manager, identity)
		wrote := map[string]bool{}
		for _, e := range events {
			if e.Verb == "patch" || e.Verb == "update" || e.Verb == "create" {
				wrote[e.resource()] = true
			}
		}
		if !wrote["jobs"] || !wrote["jobs/status"] {
			t.Errorf("%s wrote %v on the manager cluster, want jobs and jobs/status (the dispatch)", identity, wrote)
		}
	})

	t.Run("the-leader-pod-killed", func(t *testing.T) {
		leaderID := leaseHolder(ctx, t, managerClient, ns)
		leader, _, _ := strings.Cut(leaderID, "_")
		var other string
		for _, p := range runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2) {
			if p.Name != leader {
				other = p.Name
			}
		}
		pod, err := admin.CoreV1().Pods(ns).Get(ctx, leader, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the lease holder %q is no pod of the chart: %v", leaderID, err)
		}
		// A crash: the leader's process SIGKILLed on its node (it
		// releases nothing), and its pod deleted at once so the kubelet
		// does not restart it there: another replica must take over.
		killContainer(t, pod.Status.ContainerStatuses[0].ContainerID)
		killed := time.Now()
		if err := admin.CoreV1().Pods(ns).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		// Jobs created meanwhile: the other replica answers the webhooks
		// once the API server no longer routes to the dead pod (until the
		// EndpointSlice controller and the API server's cache have seen the
		// deletion, a call may still reach it and be refused, as any
		// client of a webhook-backed API sees after a replica's crash: a
		// careful client retries such a refusal).
		jobNS := optedIn()
		const n = 6
		refused := 0
		for i := range n {
			job := realJob(jobNS, fmt.Sprintf("after-kill-%d", i), "echo survived")
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := admin.BatchV1().Jobs(jobNS).Create(ctx, job.DeepCopy(), metav1.CreateOptions{})
				if webhookUnreachable(err) {
					refused++
					return false, nil
				}
				return err == nil, err
			}); err != nil {
				t.Fatalf("creating a Job while the leader is down (%d calls refused as the webhook unreachable): %v", refused, err)
			}
		}
		t.Logf("%d Jobs created while the leader was down, the last %s after the kill; %d calls refused before as the webhook unreachable",
			n, time.Since(killed).Round(10*time.Millisecond), refused)
		var holder string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			holder = leaseHolder(ctx, t, managerClient, ns)
			return holder != "" && holder != leaderID, nil
		}); err != nil {
			t.Fatalf("the lease is still held by %q a minute after its holder was killed", holder)
		}
		tookOver := time.Since(killed)
		firstPlaced := waitFirstPlaced(ctx, t, admin, jobNS, 2*time.Minute).Sub(killed)
		t.Logf("leader %s SIGKILLed: %s took the lease after %s, the first Job created after the kill was placed after %s (lease %s, retry %s)",
			leader, holder, tookOver.Round(100*time.Millisecond), firstPlaced.Round(100*time.Millisecond), realLeaseDuration, realRetryPeriod)
		// The standby, or the pod the Deployment made to replace the killed
		// one when it asks first: either leads, the killed one must not.
		holderPod, _, _ := strings.Cut(holder, "_")
		if holderPod == leader {
			t.Errorf("after killing %s the lease went back to it (%q)", leader, holder)
		}
		if holderPod != other {
			t.Logf("the lease went to %s, the Deployment's replacement of %s, before the standby %s asked", holderPod, leader, other)
		}
		// The lease expires a lease after its last renewal (at most a retry
		// period before the kill), and the other replica tries every retry
		// period (jittered by up to 1.2 times it): it leads within the lease
		// and 2.2 retry periods, and its first dispatch is one reconcile
		// later; the rest is a margin for a loaded machine.
		if limit := realLeaseDuration + 3*realRetryPeriod + 5*time.Second; firstPlaced > limit {
			t.Errorf("the first dispatch came %s after the leader's death, more than the lease, the retries and a margin (%s)", firstPlaced, limit)
		}
		waitAllComplete(ctx, t, d, jobNS, n, 3*time.Minute)
		checkRanOnce(ctx, t, admin, env, jobNS, n)
		// The Deployment replaces the killed pod.
		runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
	})
	t.Run("the-disruption-budget-keeps-a-replica", func(t *testing.T) {
		// The chart's PodDisruptionBudget (minAvailable 1): of two ready
		// replicas one may be evicted, the other not until a replacement
		// is ready.
		pods := runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
		evict := func(name string) error {
			return admin.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
		if err := evict(pods[0].Name); err != nil {
			t.Fatalf("evicting %s of two ready replicas: %v", pods[0].Name, err)
		}
		if err := evict(pods[1].Name); !apierrors.IsTooManyRequests(err) {
			t.Errorf("evicting the last ready replica %s: %v, want it refused by the disruption budget", pods[1].Name, err)
		}
		runningPods(ctx, t, admin, ns, "app.kubernetes.io/name=jobferry-manager", 2)
	})
	if t.Failed() {
		return
	}

	// The identities the charts give, in the clusters, used no right they
	// were not granted (the flows above do not use every grant).
	checkLeastPrivilege(t, "the manager's pods on the manager cluster", grantsTo(t, managerObjects, ns, "jobferry-manager"),
		readAudit(t, env.Manager, "system:serviceaccount:"+ns+":jobferry-manager"), false)
	for _, w := range env.Workers {
		checkLeastPrivilege(t, "the worker's pods on "+w.Name, grantsTo(t, workerObjects[w.Name], ns, "jobferry-worker"),
			readAudit(t, w, "system:serviceaccount:"+ns+":jobferry-worker"), false)
		checkLeastPrivilege(t, "the manager's identity on "+w.Name, grantsTo(t, workerObjects[w.Name], ns, "jobferry-manager"),
			readAudit(t, w, "system:serviceaccount:"+ns+":jobferry-manager"), false)
	}

	// Last, as it takes the installation apart.
	t.Run("remove-the-workers-and-uninstall", func(t *testing.T) { checkRemoval(ctx, t, d, env, userKubeconfig) })
}

// webhookUnreachable is the API server's refusal when it could not call an
// admission webhook at all (its endpoint gone), as opposed to the webhook's
// answer.
func webhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed to call webhook")
}

// leaseHolder is the holder identity of the manager's leader lease
// (<pod>_<uuid>).
func leaseHolder(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "jobferry-manager"}, &lease); err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// killContainer SIGKILLs every process of a container on a real node (the
// processes whose cgroup path names its ID).
func killContainer(t *testing.T, containerID string) {
	t.Helper()
	_, id, ok := strings.Cut(containerID, "://")
	if !ok || id == "" {
		t.Fatalf("container ID %q", containerID)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, p := range procs {
		cgroups, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cgroups), id) {
			continue // gone meanwhile, or another's
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no process of container %s found", id)
	}
}

// realNodeTier is the bin directory, which must have what real nodes need,
// and the release of `make release-e2e` the tier installs.
func realNodeTier(t *testing.T) (string, devenv.Release) {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RealNodesUnavailable(bin); err != nil {
		t.Fatalf("the real-node tier cannot run here: %v", err)
	}
	releaseDir, err := devenv.E2EReleaseDir()
	if err != nil {
		t.Fatal(err)
	}
	release, err := devenv.FindRelease(releaseDir)
	if err != nil {
		t.Fatal(err)
	}
	return bin, release
}

// startRealNodeTier starts a manager and two workers, each with a real
// node and an audit log, and a local registry, in dir; they are stopped,
// and nothing left of them checked, when the test ends.
func startRealNodeTier(ctx context.Context, t *testing.T, dir, bin string) *localcluster.Environment {
	t.Helper()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	started := time.Now()
	env, err := localcluster.StartEnvironment(startCtx, localcluster.EnvironmentSpec{
		Manager: localcluster.Spec{Name: "manager", RealNode: true, Audit: true},
		Workers: []localcluster.Spec{
			{Name: "worker-1", RealNode: true, Audit: true},
			{Name: "worker-2", RealNode: true, Audit: true},
		},
	}, localcluster.EnvironmentOptions{Dir: dir, BinDir: bin, Registry: true})
	if err != nil {
		t.Fatal(err)
	}
	index := env.Network.Index
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
		assertNoLeftovers(t, dir, index)
	})
	t.Logf("three clusters with a real node each started in %s", time.Since(started).Round(time.Second))
	return env
}

// realJob is a one-pod Job running script in busybox, which every real
// node has.
func realJob(ns, name, script string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: localcluster.BusyboxImage, Command: []string{"sh", "-c", script},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			}},
		},
	}
}

// runningPods waits for want Running and Ready pods matching selector.
func runningPods(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = nil
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == want, nil
	})
	if err != nil {
		t.Fatalf("%d of %d pods %s in %s Running and Ready: %v", len(pods), want, selector, ns, err)
	}
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serviceEndpoints waits for want ready endpoints of the Service and
// returns them as host:port.
func serviceEndpoints(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, service string, want int) []string {
	t.Helper()
	var addrs []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, err
		}
		addrs = nil
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if !ptr.Deref(e.Conditions.Ready, false) {
					continue
				}
				for _, a := range e.Addresses {
					for _, p := range s.Ports {
						addrs = append(addrs, fmt.Sprintf("%s:%d", a, ptr.Deref(p.Port, 0)))
					}
				}
			}
		}
		return len(addrs) == want, nil
	})
	if err != nil {
		t.Fatalf("Service %s/%s: ready endpoints %v, want %d: %v", ns, service, addrs, want, err)
	}
	return addrs
}

// waitFirstPlaced waits for a Job of ns to be placed and returns when the
// first was (its placement seen by polling, so at most a poll late).
func waitFirstPlaced(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, timeout time.Duration) time.Time {
	t.Helper()
	var placed time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, j := range list.Items {
			if j.Annotations[v1alpha1.WorkerAnnotation] != "" {
				placed = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Job of %s placed: %v", ns, err)
	}
	return placed
}

// kubectl runs bin/kubectl against a cluster and returns its output.
func kubectl(ctx context.Context, t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
