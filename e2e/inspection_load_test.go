//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/follow"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// inspectedPods and inspectedPodBytes: the Job the tenant inspects, and
// how large each of its pods is made on the worker.
const (
	inspectedPods     = 40
	inspectedPodBytes = 1 << 20
	// inspectionGrowthLimit is what the manager's memory may grow by
	// while tenants inspect (issue 44).
	inspectionGrowthLimit = 128 << 20
)

// A tenant inspecting a Job whose pods are large cannot exhaust the
// manager: 8 describes at once of a Job of 40 pods of about 1 MiB each,
// and 4 followed logs of every pod at once, each answer or refusal clear,
// the manager's resident memory growing by less than 128 MiB over its
// peak before (VmHWM, reset first), and a Job created meanwhile runs.
//
// The pods are made large on the worker, where jobferry's budgets do not
// reach: the manager refuses a Job whose template takes 1 MiB (the tenancy
// test), so each pod takes 48 KiB of env from its template and a condition
// of 1 MiB that whoever may update pods/status in the namespace writes.
func TestInspectionLoadDoesNotExhaustTheManager(t *testing.T) {
	ctx := t.Context()
	d := startOwnDispatchEnv(ctx, t, devenv.Options{Dir: outputDir(t), FollowedLogs: 4 * inspectedPods,
		Workers: []localcluster.Spec{{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(1)}}}})
	env := d.Env
	worker := d.workers["worker-1"]
	ns := d.optedInNamespace(ctx, t)
	const tenant = "tenant-i"
	bindRole(ctx, t, d.manager, ns, tenant, "inspecting-tenant",
		rbacv1.PolicyRule{APIGroups: []string{batchv1.GroupName}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{inspectionv1alpha1.GroupVersion.Group}, Resources: []string{"jobs", "jobs/log"}, Verbs: []string{"get"}})

	job := sleepJob(ns, "large-pods", time.Hour)
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](inspectedPods), ptr.To[int32](inspectedPods)
	job.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PAYLOAD", Value: strings.Repeat("e", 48<<10)}}
	if _, err := impersonate(t, env.Manager.RESTConfig(), tenant).BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, job.Name, 3*time.Minute, "all pods running", func(j *batchv1.Job) bool { return j.Status.Active == inspectedPods })
	pods := jobPods(ctx, t, worker, ns, job.Name)
	message := strings.Repeat("m", inspectedPodBytes)
	for _, p := range pods {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"example.com/Large","status":"True","message":%q}]}}`, message)
		if _, err := worker.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}

	pid := env.ManagerProcess.PID
	before := procMemory(t, pid)
	// The peak from here on (Linux: writing 5 resets VmHWM).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the manager's peak memory: %v", err)
	}
	asTenant := []string{"-n", ns, "--as", tenant, "--kubeconfig", env.Manager.KubeconfigPath}

	// 4 followed logs of every pod, at once, for as long as the
	// describes take and a Job is dispatched.
	follows := make([]*follow.Follower, 4)
	for i := range follows {
		var err error
		if follows[i], err = follow.Start(ctx, env.Manager.KubeconfigPath, ns, tenant, job.Name); err != nil {
			t.Fatal(err)
		}
		defer follows[i].Stop()
	}
	// Each follow streams or was refused before the describes start.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, f := range follows {
			if out := f.Output(); !strings.Contains(out, "[pod/") && !strings.Contains(out, "log streams open, the most one user may") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the followed logs neither streamed nor were refused: %v", err)
	}

	// 8 describes at once.
	describes := make([]string, 8)
	errs := make([]error, 8)
	var describing sync.WaitGroup
	start := time.Now()
	for i := range describes {
		describing.Go(func() {
			describes[i], errs[i] = plugin(ctx, t, env.Manager.KubeconfigPath, append([]string{"describe", "job", job.Name}, asTenant[:4]...)...)
		})
	}
	// Dispatch goes on meanwhile.
	next := sleepJob(ns, "during-inspection", time.Minute)
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	describing.Wait()
	described := time.Since(start)
	pollJob(ctx, t, d.manager, ns, next.Name, 2*time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	after := procMemory(t, pid)
	for _, f := range follows {
		f.Stop()
	}

	shown, refused := 0, 0
	for i, out := range describes {
		switch {
		case errs[i] == nil && strings.Contains(out, "Pods on worker worker-1:") && strings.Count(out, job.Name+"-") >= inspectedPods:
			shown++
		case errs[i] != nil && strings.Contains(out, "inspections at once, the most one replica may"):
			refused++
		default:
			t.Errorf("describe %d: %v\n%s", i, errs[i], out)
		}
	}
	streaming, capped, refusedLogs := 0, 0, 0
	for i, f := range follows {
		out := f.Output()
		switch {
		case strings.Contains(out, "log streams open, the most one user may"):
			refusedLogs++
		case strings.Contains(out, "jobferry: following ") && strings.Contains(out, "log streams open at once"):
			capped++
		case follow.PodsStreamed(out) == inspectedPods:
			streaming++
		default:
			t.Errorf("followed log %d said neither lines of every pod nor a clear limit:\n%.2000s", i, out)
		}
	}
	growth := after.hwm - before.rss
	t.Logf("%d describes of %d pods of %d KiB (%d shown, %d refused) in %s; %d followed logs of every pod (%d whole, %d capped, %d refused); manager RSS %d MiB before, peak %d MiB during (growth %d MiB)",
		len(describes), inspectedPods, inspectedPodBytes>>10, shown, refused, described.Round(100*time.Millisecond), len(follows), streaming, capped, refusedLogs,
		before.rss>>20, after.hwm>>20, growth>>20)
	if shown == 0 {
		t.Errorf("no describe was answered")
	}
	if growth > inspectionGrowthLimit {
		t.Errorf("the manager's memory grew by %d MiB while tenants inspected, over %d MiB", growth>>20, inspectionGrowthLimit>>20)
	}
}

// checkInspectionFlow: on a worker whose chart lets the manager inspect,
// the API server puts the manager identity's reads of pods and logs in the
// chart's priority level (issue 44 item 3), and its Job requests — dispatch
// — in another: the priority level an API server chose is in each
// response's X-Kubernetes-PF-PriorityLevel-UID header.
func checkInspectionFlow(ctx context.Context, t *testing.T, w *localcluster.Cluster, ns string) {
	t.Helper()
	admin, err := kubernetes.NewForConfig(w.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	level, err := admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "jobferry-worker-inspection", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: the chart's inspection priority level: %v", w.Name, err)
	}
	cfg := w.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":jobferry-manager"}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	levelOf := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		// Any answer (even a refusal) was classified.
		return resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"), nil
	}
	var pods, jobs string
	// The API server takes up a new FlowSchema within seconds.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if pods, err = levelOf("/api/v1/namespaces/default/pods?limit=1"); err != nil {
			return false, err
		}
		if jobs, err = levelOf("/apis/batch/v1/namespaces/default/jobs?limit=1"); err != nil {
			return false, err
		}
		return pods == string(level.UID), nil
	}); err != nil {
		t.Errorf("%s: the manager's pod reads are in priority level %q, not the chart's inspection level %s: %v", w.Name, pods, level.UID, err)
	}
	if jobs == string(level.UID) || jobs == "" {
		t.Errorf("%s: the manager's Job requests are in priority level %q, want another than inspection's %s", w.Name, jobs, level.UID)
	}
}

// followingTenants and followedPods: issue 44's tenants following logs
// while Jobs are dispatched (the bench's --inspection-load measures the
// latency).
const (
	followingTenants    = 4
	followedPods        = 50
	dispatchedMeanwhile = 20
)

// Dispatch goes on while 4 tenants follow the logs of 50 pods each, on
// workers registered with the worker chart's identity for the manager (so
// API Priority and Fairness applies as on an installation): every Job
// created meanwhile gets its mirror; every followed pod's stream is still
// open after them (a line appended to every container's log then reaches
// each); and the manager's reads of the followed pods go to the chart's
// inspection priority level on the workers, which each worker also
// classifies so when the manager's identity asks. How long dispatch takes
// meanwhile, against quiet runs, is `make bench BENCH_INSPECTION=1`'s to
// measure, with the CPUs split.
func TestDispatchGoesOnWhileTenantsFollowLogs(t *testing.T) {
	ctx := t.Context()
	d := startOwnDispatchEnv(ctx, t, devenv.Options{Dir: outputDir(t), ChartIdentity: true, FollowedLogs: followingTenants * followedPods,
		Workers: []localcluster.Spec{
			{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
			{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
		}})
	env := d.Env
	ns := d.optedInNamespace(ctx, t)
	inspected := func() float64 {
		total := 0.0
		for _, w := range env.Workers {
			total += dispatchedIn(ctx, t, w, "jobferry-worker-inspection")
		}
		return total
	}
	for _, w := range env.Workers {
		checkInspectionFlow(ctx, t, w, devenv.SystemNamespace)
	}
	before := inspected()

	var followers []*follow.Follower
	for i := range followingTenants {
		tenant := fmt.Sprintf("tenant-%d", i+1)
		if err := follow.BindTenant(ctx, d.manager, ns, tenant); err != nil {
			t.Fatal(err)
		}
		job := follow.Job(ns, "followed-"+tenant, followedPods)
		if _, err := impersonate(t, env.Manager.RESTConfig(), tenant).BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pollJob(ctx, t, d.manager, ns, job.Name, 3*time.Minute, "all pods running", func(j *batchv1.Job) bool { return j.Status.Active == followedPods })
		f, err := follow.Start(ctx, env.Manager.KubeconfigPath, ns, tenant, job.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		followers = append(followers, f)
	}
	if err := follow.WaitStreaming(ctx, followers, followedPods, time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := inspected(); after <= before {
		t.Errorf("the workers' inspection priority level dispatched %v requests before the tenants followed and %v after: the manager's reads of their pods are not in it", before, after)
	}

	var created []string
	for i := range dispatchedMeanwhile {
		job := sleepJob(ns, fmt.Sprintf("meanwhile-%02d", i), time.Second)
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		created = append(created, job.Name)
	}
	for _, name := range created {
		pollJob(ctx, t, d.manager, ns, name, 2*time.Minute, "mirrored", func(j *batchv1.Job) bool {
			return j.Annotations[v1alpha1.MirrorUIDAnnotation] != ""
		})
	}
	// Every stream is still open: a line every container prints now
	// reaches every follow, for each of its pods.
	const last = "printed once the Jobs were dispatched"
	for _, w := range env.Workers {
		if err := w.AppendContainerLog(last); err != nil {
			t.Fatal(err)
		}
	}
	if err := follow.WaitLine(ctx, followers, last, followedPods, time.Minute); err != nil {
		t.Error(err)
	}
}

// dispatchedIn is how many requests the API server of c has dispatched in
// priority level level (apiserver_flowcontrol_dispatched_requests_total).
func dispatchedIn(ctx context.Context, t *testing.T, c *localcluster.Cluster, level string) float64 {
	t.Helper()
	admin, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the metrics of %s's API server: %v", c.Name, err)
	}
	total := 0.0
	if f, ok := parseMetrics(t, c.Name, bytes.NewReader(raw))["apiserver_flowcontrol_dispatched_requests_total"]; ok {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "priority_level" && l.GetValue() == level {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
