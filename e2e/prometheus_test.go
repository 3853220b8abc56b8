//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/internal/dashboards"
)

// A real Prometheus (bin/prometheus, Debian's package: make prometheus)
// scrapes the manager and the three workers' binaries (each labelling its
// own metrics with its name, --worker-name: the scrape adds no label) while
// jobferry dispatches Jobs that succeed, one that fails, one its user
// suspends, Jobs that wait for room and are woken, one that fits nowhere and
// one on a worker that is then lost, with worker-1 registered with a token
// that expires. Then every query of every panel of every dashboard, its
// variables substituted, returns at least one sample with a value (not
// NaN); an empty one fails the test naming the dashboard and the panel.
func TestDashboardsShowDataFromARealPrometheus(t *testing.T) {
	ctx := t.Context()
	dir := outputDir(t)
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	d := startOwnDispatchEnv(startCtx, t, devenv.Options{
		Dir: dir,
		Workers: []localcluster.Spec{
			{Name: "worker-1", Pools: []localcluster.Pool{devenv.GeneralPool(2), devenv.GPUPool(1)}},
			{Name: "worker-2", Pools: []localcluster.Pool{devenv.GeneralPool(2)}},
			{Name: "worker-3", Pools: []localcluster.Pool{devenv.GeneralPool(1)}},
		},
		JobControllers: devenv.DevJobControllers,
		ManagerArgs:    []string{"--worker-health-interval=2s", "--worker-lost-timeout=8s"},
	})
	env := d.Env
	promURL := startPrometheus(ctx, t, env, dir)

	// worker-1 with a token that expires, as `kubectl jobferry join` registers
	// workers: the credential-expiry panel has something to show.
	registerWithExpiringToken(ctx, t, d, env.Workers[0])

	ns := d.optedInNamespace(ctx, t)
	create := func(job *batchv1.Job) {
		t.Helper()
		if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pinned := func(job *batchv1.Job, worker string) *batchv1.Job {
		job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + worker}
		return job
	}
	// Jobs that run and succeed, on worker-1 and worker-2.
	for i := range 8 {
		create(pinned(sleepJob(ns, fmt.Sprintf("ok-%d", i), 2*time.Second), fmt.Sprintf("worker-%d", 1+i%2)))
	}
	// One that fails, on worker-2 (the jobferry worker's Job controller).
	failing := pinned(sleepJob(ns, "fails", time.Hour), "worker-2")
	failing.Spec.BackoffLimit = ptr.To[int32](0)
	failing.Spec.Template.Labels = map[string]string{failPodLabel: "true"}
	create(failing)
	// One its user suspends.
	suspended := sleepJob(ns, "suspended", time.Second)
	suspended.Spec.Suspend = ptr.To(true)
	create(suspended)
	// Six that each take most of a node of worker-2: two run, four wait for
	// room and are woken as the others finish.
	for i := range 6 {
		big := pinned(sleepJob(ns, fmt.Sprintf("big-%d", i), 3*time.Second), "worker-2")
		big.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resourceQuantity("12")
		create(big)
	}
	// One that fits nowhere.
	huge := sleepJob(ns, "huge", time.Second)
	huge.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resourceQuantity("100")
	create(huge)
	// One on worker-3, which is then lost.
	create(pinned(sleepJob(ns, "stranded", time.Hour), "worker-3"))

	pollJob(ctx, t, d.manager, ns, "stranded", time.Minute, "running on worker-3", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	if err := env.Workers[2].StopComponent("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, failing.Name, 2*time.Minute, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed) != nil })
	for i := range 6 {
		pollJob(ctx, t, d.manager, ns, fmt.Sprintf("big-%d", i), 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	}
	for i := range 8 {
		pollJob(ctx, t, d.manager, ns, fmt.Sprintf("ok-%d", i), time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	}
	waitConnected(ctx, t, d, "worker-3", metav1.ConditionFalse)

	// Every query, until each has returned a value (the last scrapes and the
	// lost worker's timeout may take a few seconds to show) or a minute
	// passed.
	type query struct{ dashboard, panel, expr string }
	var queries []query
	for _, db := range dashboards.All() {
		for _, p := range db.Panels {
			for _, target := range p.Targets {
				queries = append(queries, query{db.Title, p.Title, dashboards.Substitute(target.Expr)})
			}
		}
	}
	values := map[query]string{}
	var lastErr map[query]string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		lastErr = map[query]string{}
		for _, q := range queries {
			if _, done := values[q]; done {
				continue
			}
			v, err := promQuery(ctx, promURL, q.expr)
			if err != nil {
				lastErr[q] = err.Error()
				continue
			}
			values[q] = v
		}
		return len(lastErr) == 0, nil
	})
	if err != nil {
		for _, q := range queries {
			if why, failed := lastErr[q]; failed {
				t.Errorf("dashboard %q, panel %q: %s\n  query: %s", q.dashboard, q.panel, why, q.expr)
			}
		}
		t.Fatalf("%d of %d queries returned no value", len(lastErr), len(queries))
	}
	for _, q := range queries {
		t.Logf("%s | %s | %s", q.dashboard, q.panel, values[q])
	}
	// What the run did shows in the numbers.
	for _, c := range []struct {
		expr, want string
		ok         func(float64) bool
	}{
		{`sum(jobferry_workercluster_connected)`, "2 (worker-3 lost)", func(v float64) bool { return v == 2 }},
		{`max(jobferry_jobs_waiting{reason="user_suspended"})`, "1", func(v float64) bool { return v == 1 }},
		{`max(jobferry_jobs_waiting{reason="no_worker_fits"})`, "≥ 1 (huge)", func(v float64) bool { return v >= 1 }},
		{`sum(jobferry_waiting_jobs_woken_total)`, "≥ 1", func(v float64) bool { return v >= 1 }},
		{`sum(jobferry_worker_jobs_finished_total{worker="worker-2", result="failed"})`, "≥ 1", func(v float64) bool { return v >= 1 }},
		{`min(jobferry_workercluster_credential_expiry_timestamp_seconds{worker="worker-1"}) - time()`, "within the hour", func(v float64) bool { return v > 0 && v <= 3600 }},
		// Counters exist at 0 before their first increment, so a burst and
		// a first failure show in rate() and increase().
		{`sum(rate(jobferry_dispatch_total{worker="worker-1", result="created"}[5m]))`, "> 0", func(v float64) bool { return v > 0 }},
		{`sum(increase(jobferry_worker_jobs_finished_total{worker="worker-2", result="failed"}[1h]))`, "> 0", func(v float64) bool { return v > 0 }},
	} {
		got, err := promQuery(ctx, promURL, c.expr)
		v, perr := strconv.ParseFloat(got, 64)
		if err != nil || perr != nil || !c.ok(v) {
			t.Errorf("%s = %q (%v), want %s", c.expr, got, err, c.want)
		}
	}
	t.Logf("all %d queries of %d dashboards returned a value", len(queries), len(dashboards.All()))
}

// startPrometheus runs bin/prometheus scraping the manager and each worker
// binary every second, as they are, and returns its URL.
func startPrometheus(ctx context.Context, t *testing.T, env *devenv.Env, dir string) string {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "prometheus")); err != nil {
		t.Fatalf("bin/prometheus is missing (make prometheus installs it): %v", err)
	}
	hostPort := func(metricsURL string) string {
		u, err := url.Parse(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	fmt.Fprintf(&cfg, "  - job_name: jobferry-manager\n    static_configs:\n      - targets: [%q]\n", hostPort(env.MetricsURL))
	fmt.Fprintf(&cfg, "  - job_name: jobferry-worker\n    static_configs:\n")
	for _, w := range env.Workers {
		// No label added: each worker's metrics carry its name (--worker-name).
		fmt.Fprintf(&cfg, "      - targets: [%q]\n", hostPort(env.WorkerMetricsURLs[w.Name]))
	}
	promDir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(promDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(promDir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := env.Manager.StartComponent("prometheus", filepath.Join(bin, "prometheus"),
		"--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(promDir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	waitReady(ctx, t, p, base+"/-/ready")
	// Every target up before anything happens, so rates have a start.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		v, err := promQuery(ctx, base, "count(up == 1)")
		return err == nil && v == strconv.Itoa(1+len(env.Workers)), nil
	})
	if err != nil {
		t.Fatalf("Prometheus does not scrape all %d targets: %v", 1+len(env.Workers), err)
	}
	return base
}

// promQuery evaluates expr now and returns the largest value with its
// labels, or an error when the result is empty or holds only NaN.
func promQuery(ctx context.Context, base, expr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("decoding the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if body.Status != "success" {
		return "", fmt.Errorf("Prometheus: %s", body.Error)
	}
	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	var samples []sample
	switch body.Data.ResultType {
	case "vector":
		if err := json.Unmarshal(body.Data.Result, &samples); err != nil {
			return "", err
		}
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(body.Data.Result, &s); err != nil {
			return "", err
		}
		samples = []sample{{Value: s}}
	default:
		return "", fmt.Errorf("result of type %s", body.Data.ResultType)
	}
	if len(samples) == 0 {
		return "", fmt.Errorf("empty result")
	}
	// The largest value, to show what the panel shows at its peak.
	best, bestValue := -1, math.Inf(-1)
	for i, s := range samples {
		v, _ := s.Value[1].(string)
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && f > bestValue {
			best, bestValue = i, f
		}
	}
	if best < 0 {
		return "", fmt.Errorf("%d series, every value NaN", len(samples))
	}
	v, _ := samples[best].Value[1].(string)
	if len(samples[best].Metric) > 0 {
		return fmt.Sprintf("%s %v (%d series)", v, samples[best].Metric, len(samples)), nil
	}
	return v, nil
}

// registerWithExpiringToken swaps the worker's kubeconfig Secret for one
// with a one-hour token of a ServiceAccount bound to cluster-admin there, and
// waits until the manager shows its expiry.
func registerWithExpiringToken(ctx context.Context, t *testing.T, d *dispatchEnv, w *localcluster.Cluster) {
	t.Helper()
	worker := d.workers[w.Name]
	const ns, sa = "kube-system", "jobferry-e2e-manager"
	if _, err := worker.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}
	if _, err := worker.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := tokenKubeconfig(ctx, t, w, ns, sa, "")
	secret, err := d.manager.CoreV1().Secrets(devenv.SystemNamespace).Get(ctx, w.Name+"-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["kubeconfig"] = kubeconfig
	if _, err := d.manager.CoreV1().Secrets(devenv.SystemNamespace).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: w.Name}, wc); err != nil {
			return false, err
		}
		return wc.Status.Credential != nil && wc.Status.Credential.ExpiresAt != nil, nil
	})
	if err != nil {
		t.Fatalf("the manager never showed the expiry of %s's new token: %v", w.Name, err)
	}
	waitConnected(ctx, t, d, w.Name, metav1.ConditionTrue)
}
