//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// joinWorker runs `kubectl jobferry join` for a worker of the merged
// kubeconfig with a 10-minute token (the shortest the API issues), waits
// for it to report Connected and Authorized, and labels the WorkerCluster
// for the tests' cluster selectors.
func joinWorker(ctx context.Context, t *testing.T, kubeconfig string, c client.Client, worker string, controller v1alpha1.JobControllerMode) {
	t.Helper()
	args := []string{"join", worker, "--worker-context", worker, "--token-lifetime", "10m"}
	if controller != "" {
		args = append(args, "--job-controller", string(controller))
	}
	out := mustPlugin(ctx, t, kubeconfig, args...)
	if !containsAll(out, "workercluster.jobferry.dev/"+worker, "expires at", "is Connected and Authorized") {
		t.Fatalf("join %s:\n%s", worker, out)
	}
	t.Logf("join %s:\n%s", worker, out)
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: worker}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, workerNameLabel, worker)
	if err := c.Patch(ctx, wc, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// checkJoinComparesTheManagerID checks what join says of the worker
// charts' pinning (dry runs: nothing is written): worker-1's chart, pinned
// to this manager (id), joins without a word; worker-2's, not pinned, with
// a warning printing the command that pins it; worker-1's, to a manager of
// another namespace (another ID), not at all; and a namespace that is not
// there is refused as such.
func checkJoinComparesTheManagerID(ctx context.Context, t *testing.T, managerCluster kubernetes.Interface, kubeconfig, ns, id string) {
	t.Helper()
	join := func(worker, managerNS string) (string, error) {
		_, stderr, err := pluginOutputs(ctx, t, kubeconfig, "join", worker, "--worker-context", worker, "--jobferry-namespace", managerNS, "--dry-run")
		return stderr, err
	}
	if stderr, err := join("worker-1", ns); err != nil || strings.Contains(stderr, "Warning") {
		t.Errorf("join of worker-1, whose chart is pinned to this manager: %v, stderr %q", err, stderr)
	}
	stderr, err := join("worker-2", ns)
	want := "Warning: the jobferry-worker chart on context worker-2 is not pinned to this manager"
	pin := "helm upgrade jobferry-worker <chart> -n " + ns + " --kube-context worker-2 --reset-then-reuse-values --set-string managerIdentity.managerID=" + id + " --set-string workerName=worker-2"
	if err != nil || !containsAll(stderr, want, pin) {
		t.Errorf("join of worker-2, whose chart is not pinned: %v, stderr %q, want a warning saying %q and printing %q", err, stderr, want, pin)
	} else {
		t.Logf("join of worker-2: %s", stderr)
	}
	// Another manager installation, in another namespace of this cluster.
	other := "jobferry-elsewhere"
	_, err = join("worker-1", other)
	if want := "namespace " + other + " is not on the manager cluster"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("join of worker-1 for namespace %s, which is not there: %v, want it refused saying %q", other, err, want)
	}
	if _, err := managerCluster.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := managerCluster.CoreV1().Namespaces().Delete(ctx, other, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()
	_, err = join("worker-1", other)
	if want := "the jobferry-worker chart on context worker-1 is pinned to manager " + id + ", not to this one"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("join of worker-1 by the manager of namespace %s: %v, want it refused saying %q", other, err, want)
	} else {
		t.Logf("refused: %v", err)
	}
}

// checkRanOnce checks nothing was lost or run twice: every Job of ns
// succeeded once with no failure at its first dispatch attempt, and the
// workers' audit logs show exactly one mirror created per Job, by the
// manager's identity.
func checkRanOnce(ctx context.Context, t *testing.T, c kubernetes.Interface, env *localcluster.Environment, ns string, n int) {
	t.Helper()
	list, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		if j.Status.Succeeded != 1 || j.Status.Failed != 0 || j.Annotations[v1alpha1.DispatchAttemptAnnotation] != "1" {
			t.Errorf("%s: succeeded %d, failed %d, attempt %q", j.Name, j.Status.Succeeded, j.Status.Failed, j.Annotations[v1alpha1.DispatchAttemptAnnotation])
		}
	}
	checkOneMirrorEach(t, env, ns, n)
}

// checkOneMirrorEach: the workers' audit logs show exactly one mirror
// created, by the manager's identity, for each of n Jobs of namespace ns.
func checkOneMirrorEach(t *testing.T, env *localcluster.Environment, ns string, n int) {
	t.Helper()
	created := map[string]int{}
	for _, w := range env.Workers {
		for _, e := range readAudit(t, w, "system:serviceaccount:"+devenv.SystemNamespace+":jobferry-manager") {
			if e.Verb == "create" && e.resource() == "jobs" && e.ObjectRef.Namespace == ns && e.ResponseStatus != nil && e.ResponseStatus.Code == 201 {
				if e.ObjectRef.Name == "" {
					t.Fatalf("the audit log names no Job in a create: %s", e.RequestURI)
				}
				created[e.ObjectRef.Name]++
			}
		}
	}
	if len(created) != n {
		t.Errorf("mirrors created for %d Jobs, want %d", len(created), n)
	}
	for name, count := range created {
		if count != 1 {
			t.Errorf("%s: %d mirrors created", name, count)
		}
	}
}

// scrapeVerifiedFamilies scrapes the manager's HTTPS metrics endpoint,
// verifying its certificate as scrapeVerified does, with the token of the
// ServiceAccount the chart installs let read metrics (metricsReader), and
// parses them.
func scrapeVerifiedFamilies(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, secret, serverName, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := getVerifiedMetrics(ctx, t, c, ns, secret, serverName, url, serviceAccountToken(ctx, t, c, ns, metricsReader))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s %s", url, resp.Status, body)
	}
	return parseMetrics(t, url, resp.Body)
}

// metricsReader is the ServiceAccount the tests' chart installs bind to
// the metrics-reader ClusterRole (metricsReaderValues).
const metricsReader = "metrics-scraper"

// metricsReaderValues are the chart values that let metricsReader in ns
// read the manager's metrics.
func metricsReaderValues(ns string) []string {
	return []string{"--set", "metrics.readers[0].namespace=" + ns, "--set", "metrics.readers[0].name=" + metricsReader}
}

// getVerifiedMetrics GETs the metrics endpoint over HTTPS verified with the
// CA of the Secret for serverName, with token as the bearer ("": none).
func getVerifiedMetrics(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, secret, serverName, url, token string) *http.Response {
	t.Helper()
	s, err := c.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("Secret %s has no CA (ca.crt)", secret)
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	return resp
}

// serviceAccountToken is a token of ServiceAccount ns/name, made when
// missing.
func serviceAccountToken(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/%s: %v", ns, name, err)
	}
	return token.Status.Token
}

func assertCounterZero(t *testing.T, families map[string]*dto.MetricFamily, name string) {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			t.Errorf("%s%v = %v, want 0", name, m.Label, v)
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkCredentialStatus checks a worker's credential as the manager
// reports it: the ServiceAccount, an expiry 10 minutes after issue in the
// future, a renewal time before it, the CredentialRenewal condition True,
// and the expiry metric equal to the status.
func checkCredentialStatus(ctx context.Context, t *testing.T, c client.Client, families map[string]*dto.MetricFamily, worker string) {
	t.Helper()
	wc := &v1alpha1.WorkerCluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: worker}, wc); err != nil {
		t.Fatal(err)
	}
	cred := wc.Status.Credential
	if cred == nil || cred.ExpiresAt == nil || cred.IssuedAt == nil || cred.RenewAt == nil {
		t.Fatalf("%s: credential status %+v", worker, cred)
	}
	if cred.ServiceAccount != devenv.SystemNamespace+"/jobferry-manager" || cred.ExpiresAt.Sub(cred.IssuedAt.Time) != 10*time.Minute ||
		!cred.ExpiresAt.After(time.Now()) || !cred.RenewAt.Before(cred.ExpiresAt) {
		t.Errorf("%s: credential %s, issued %s, expires %s, renewed at %s", worker, cred.ServiceAccount, cred.IssuedAt, cred.ExpiresAt, cred.RenewAt)
	}
	if cond := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionCredentialRenewal); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("%s: CredentialRenewal %+v", worker, cond)
	}
	found := false
	for _, m := range families["jobferry_workercluster_credential_expiry_timestamp_seconds"].GetMetric() {
		if labelValue(m, "worker") == worker {
			found = true
			// Scraped a moment apart: a renewal may fall in between.
			if got := time.Unix(int64(m.GetGauge().GetValue()), 0); got.Before(cred.ExpiresAt.Add(-time.Minute)) || got.After(cred.ExpiresAt.Add(time.Minute)) {
				t.Errorf("%s: expiry metric %s, status %s", worker, got, cred.ExpiresAt)
			}
		}
	}
	if !found {
		t.Errorf("no jobferry_workercluster_credential_expiry_timestamp_seconds for %s", worker)
	}
}

// checkPlugin runs status, get jobs, describe and logs, and checks what
// they print against the clusters.
func checkPlugin(ctx context.Context, t *testing.T, d *dispatchEnv, kubeconfig, ns string) {
	t.Helper()
	// A Job that runs for the whole check, on worker-1, and two finished ones.
	running := sleepJob(ns, "long-running", time.Hour)
	running.Labels = map[string]string{"e2e-role": "long"}
	worker := d.dispatchTo(ctx, t, running, "worker-1")
	for _, name := range []string{"short-1", "short-2"} {
		d.dispatchTo(ctx, t, sleepJob(ns, name, time.Second), "worker-2")
	}
	for _, name := range []string{"short-1", "short-2"} {
		pollJob(ctx, t, d.manager, ns, name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	}
	pollJob(ctx, t, d.manager, ns, running.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })

	t.Run("status", func(t *testing.T) {
		var report struct {
			Workers []struct {
				Name, Connected, Authorized string
				KubernetesVersion           string
				Cordoned                    bool
				CredentialExpiresAt         *metav1.Time
				Pools                       []struct{ Name string }
				Jobs                        map[string]int
			}
		}
		out := mustPlugin(ctx, t, kubeconfig, "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, out)
		}
		jobs, err := d.manager.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]int{}
		for _, j := range jobs.Items {
			w := j.Annotations[v1alpha1.WorkerAnnotation]
			if ptr.Deref(j.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy || w == "" {
				continue
			}
			if want[w] == nil {
				want[w] = map[string]int{}
			}
			phase := "Pending"
			switch {
			case hasCondition(&j, batchv1.JobComplete) != nil:
				phase = "Succeeded"
			case hasCondition(&j, batchv1.JobFailed) != nil:
				phase = "Failed"
			case j.Status.Active > 0:
				phase = "Running"
			}
			want[w][phase]++
		}
		if len(report.Workers) != 2 {
			t.Fatalf("status shows %d workers:\n%s", len(report.Workers), out)
		}
		for _, w := range report.Workers {
			wc := &v1alpha1.WorkerCluster{}
			if err := d.managerClient.Get(ctx, client.ObjectKey{Name: w.Name}, wc); err != nil {
				t.Fatal(err)
			}
			if w.Connected != "True" || w.Authorized != "True" || w.Cordoned != wc.Spec.Cordoned || w.CredentialExpiresAt == nil || len(w.Pools) != len(wc.Status.Capacity.Pools) {
				t.Errorf("status of %s: %+v; WorkerCluster %+v", w.Name, w, wc.Status)
			}
			if w.KubernetesVersion == "" || w.KubernetesVersion != wc.Status.KubernetesVersion {
				t.Errorf("status shows %s on Kubernetes %q, its WorkerCluster %q", w.Name, w.KubernetesVersion, wc.Status.KubernetesVersion)
			}
			if fmt.Sprint(w.Jobs) != fmt.Sprint(want[w.Name]) {
				t.Errorf("status counts %v Jobs on %s, the manager has %v", w.Jobs, w.Name, want[w.Name])
			}
		}
		table := mustPlugin(ctx, t, kubeconfig, "status")
		t.Logf("kubectl jobferry status:\n%s", table)
		if !containsAll(table, "Manager:", "worker-1", "worker-2", "True (Connected)", "general") {
			t.Errorf("status table:\n%s", table)
		}
	})
	t.Run("get-jobs", func(t *testing.T) {
		out := mustPlugin(ctx, t, kubeconfig, "get", "jobs", "-A")
		t.Logf("kubectl jobferry get jobs -A:\n%s", out)
		rows := map[string][]string{}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if header := strings.Fields(lines[0]); strings.Join(header, " ") != "NAMESPACE NAME STATUS COMPLETIONS DURATION AGE WORKER ATTEMPT" {
			t.Fatalf("header %q", header)
		}
		for _, line := range lines[1:] {
			if f := strings.Fields(line); f[0] == ns {
				rows[f[1]] = f
			}
		}
		list, err := d.manager.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(list.Items) {
			t.Errorf("get jobs -A lists %d Jobs of %s, the manager has %d", len(rows), ns, len(list.Items))
		}
		for _, j := range list.Items {
			row := rows[j.Name]
			status := "Running"
			if hasCondition(&j, batchv1.JobComplete) != nil {
				status = "Complete"
			}
			// NAMESPACE NAME STATUS COMPLETIONS [DURATION] AGE WORKER ATTEMPT
			if len(row) < 7 || row[2] != status || row[len(row)-2] != j.Annotations[v1alpha1.WorkerAnnotation] || row[len(row)-1] != j.Annotations[v1alpha1.DispatchAttemptAnnotation] {
				t.Errorf("%s: row %q; the Job is %s on %s, attempt %s", j.Name, row, status, j.Annotations[v1alpha1.WorkerAnnotation], j.Annotations[v1alpha1.DispatchAttemptAnnotation])
			}
		}
	})
	t.Run("get-jobs-printing", func(t *testing.T) {
		// kubectl's printers, a selector, one Job read by name, and pages:
		// a page of one Job at a time lists what one request lists.
		columns := `custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,WORKER:.metadata.annotations.jobferry\.dev/worker`
		whole := mustPlugin(ctx, t, kubeconfig, "get", "jobs", "-n", ns, "--no-headers", "-o", columns)
		paged := mustPlugin(ctx, t, kubeconfig, "get", "jobs", "-n", ns, "--no-headers", "-o", columns, "--chunk-size=1")
		if whole != paged || strings.Count(whole, ns+" ") != 3 || strings.Contains(whole, "NAMESPACE") {
			t.Errorf("get jobs of %s's 3 Jobs in pages of one:\n%s\nin one request:\n%s", ns, paged, whole)
		}
		if out := mustPlugin(ctx, t, kubeconfig, "get", "jobs", running.Name, "-n", ns, "-o", `jsonpath={.metadata.annotations.jobferry\.dev/worker}`); out != "worker-1" {
			t.Errorf("get jobs %s -o jsonpath of its worker = %q, want worker-1", running.Name, out)
		}
		if out := mustPlugin(ctx, t, kubeconfig, "get", "jobs", "-n", ns, "-l", "e2e-role=long", "-o", "name"); out != "job.batch/"+running.Name+"\n" {
			t.Errorf("get jobs -l e2e-role=long -o name = %q, want only %s", out, running.Name)
		}
		// The worker is a label of the Job too: selected by it, here and
		// with kubectl itself.
		onWorker2 := mustPlugin(ctx, t, kubeconfig, "get", "jobs", "-n", ns, "-l", v1alpha1.WorkerLabel+"=worker-2", "-o", "name")
		if onWorker2 != "job.batch/short-1\njob.batch/short-2\n" {
			t.Errorf("get jobs -l %s=worker-2 -o name = %q, want short-1 and short-2", v1alpha1.WorkerLabel, onWorker2)
		}
		if _, err := plugin(ctx, t, kubeconfig, "get", "jobs", "no-such-job", "-n", ns); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("get jobs of a Job that is not there: %v, want not found", err)
		}
	})
	t.Run("version", func(t *testing.T) {
		var report struct {
			Client       struct{ Version string }
			Manager      []struct{ Pod, Version, Image string }
			ManagerError string
		}
		out := mustPlugin(ctx, t, kubeconfig, "version", "-o", "json")
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("version -o json: %v\n%s", err, out)
		}
		pods, err := d.manager.CoreV1().Pods(devenv.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=jobferry-manager"})
		if err != nil {
			t.Fatal(err)
		}
		if report.Client.Version == "" || len(report.Manager) != len(pods.Items) {
			t.Fatalf("version: %+v; the manager has %d pods", report, len(pods.Items))
		}
		if len(pods.Items) == 0 && !strings.Contains(report.ManagerError, "no manager pods") {
			// This test's manager runs as a process, not as pods.
			t.Errorf("version of a manager without pods: %q, want it said", report.ManagerError)
		}
		for i, p := range report.Manager {
			if want := pods.Items[i].Labels["app.kubernetes.io/version"]; p.Version != want || p.Image == "" {
				t.Errorf("version of %s: %q (image %q), the chart says %q", p.Pod, p.Version, p.Image, want)
			}
		}
	})
	t.Run("completion", func(t *testing.T) {
		// What the shell gets for `kubectl jobferry cordon <TAB>` and
		// `kubectl jobferry describe job -n NS long<TAB>`: the names read
		// from the manager.
		complete := func(args ...string) []string {
			args = append([]string{"__complete"}, args...)
			args = append(args[:len(args)-1], "--kubeconfig", kubeconfig, args[len(args)-1])
			out, err := exec.CommandContext(ctx, pluginBinary(t, kubeconfig), args...).Output()
			if err != nil {
				t.Fatalf("kubectl jobferry %s: %v", strings.Join(args, " "), err)
			}
			// The names, then the directive (":4", no file completion).
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if last := lines[len(lines)-1]; last != ":4" {
				t.Errorf("completion directive %q, want :4 (no files)", last)
			}
			return lines[:len(lines)-1]
		}
		if got := complete("cordon", ""); !slices.Contains(got, "worker-1") || !slices.Contains(got, "worker-2") {
			t.Errorf("cordon completes %v, want the workers", got)
		}
		if got := complete("describe", "job", "-n", ns, "long"); !slices.Equal(got, []string{running.Name}) {
			t.Errorf("describe job long<TAB> completes %v, want %s", got, running.Name)
		}
	})
	t.Run("get-jobs-watch", func(t *testing.T) {
		// The Job listed, then each change of it as it happens.
		initial := "job.batch/" + running.Name + "\n"
		watchPlugin(ctx, t, kubeconfig, []string{"get", "jobs", "-n", ns, "-l", "e2e-role=long", "-o", "name", "--watch"},
			[]string{initial, initial + initial}, func(int) {
				patch := []byte(`{"metadata":{"labels":{"e2e-watched":"yes"}}}`)
				if _, err := d.manager.BatchV1().Jobs(ns).Patch(ctx, running.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Error(err)
				}
			})
	})
	t.Run("describe", func(t *testing.T) {
		mirror, err := worker.BatchV1().Jobs(ns).Get(ctx, running.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(mirror.UID)})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods of the mirror: %v, %v", pods, err)
		}
		pod := pods.Items[0]
		out := mustPlugin(ctx, t, kubeconfig, "describe", "job", running.Name, "-n", ns)
		t.Logf("kubectl jobferry describe job:\n%s", out)
		if !containsAll(out, "Worker:       worker-1", "Attempt:      1", "Dispatched", "Mirror on worker worker-1:", string(mirror.UID),
			pod.Name, string(pod.Status.Phase), pod.Spec.NodeName, "SuccessfulCreate", "pod/"+pod.Name, "Scheduled") {
			t.Errorf("describe does not show the mirror %s, its pod %s (%s on %s) and their Events", mirror.UID, pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		}
	})
	t.Run("logs", func(t *testing.T) {
		want := strings.Join(localcluster.ContainerLogLines("worker-1"), "\n") + "\n"
		if out := mustPlugin(ctx, t, kubeconfig, "logs", "job", running.Name, "-n", ns); out != want {
			t.Errorf("logs job %s = %q, want worker-1's container log %q", running.Name, out, want)
		}
		// -f keeps the stream open while the pod runs (KWOK holds it open
		// too): the lines must arrive through the open stream.
		if out := followPlugin(ctx, t, kubeconfig, want, "logs", "job", running.Name, "-n", ns, "-f"); out != want {
			t.Errorf("logs -f job %s streamed %q, want %q", running.Name, out, want)
		}
		mirror, err := worker.BatchV1().Jobs(ns).Get(ctx, running.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := worker.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(mirror.UID)})
		if err != nil {
			t.Fatal(err)
		}
		out := mustPlugin(ctx, t, kubeconfig, "logs", "job", running.Name, "-n", ns, "--all-pods", "-c", "main")
		if !strings.HasPrefix(out, "[pod/"+pods.Items[0].Name+"/main] "+localcluster.ContainerLogLines("worker-1")[0]) {
			t.Errorf("logs --all-pods:\n%s", out)
		}
		// A finished Job's mirror and pods stay until the Job is deleted:
		// its logs are still there.
		if out := mustPlugin(ctx, t, kubeconfig, "logs", "job", "short-1", "-n", ns); out != strings.Join(localcluster.ContainerLogLines("worker-2"), "\n")+"\n" {
			t.Errorf("logs of a finished Job = %q, want worker-2's container log", out)
		}
	})
	t.Run("join-dry-run", func(t *testing.T) {
		before := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: "worker-1"}, before); err != nil {
			t.Fatal(err)
		}
		out := mustPlugin(ctx, t, kubeconfig, "join", "worker-1", "--worker-context", "worker-1", "--dry-run")
		if !containsAll(out, "kind: Secret", "kind: WorkerCluster", "name: worker-1-kubeconfig", "minted by the TokenRequest API when not a dry run") {
			t.Errorf("join --dry-run:\n%s", out)
		}
		after := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: "worker-1"}, after); err != nil {
			t.Fatal(err)
		}
		if after.Generation != before.Generation {
			t.Errorf("join --dry-run changed the WorkerCluster (generation %d -> %d)", before.Generation, after.Generation)
		}
	})
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, running.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
