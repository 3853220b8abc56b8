//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/follow"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// inspectionAPIService is the chart's APIService of the inspection API.
const inspectionAPIService = "v1alpha1.inspection.jobferry.dev"

var apiServicesResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// pointInspectionAt makes the chart's APIService reach a manager process on
// localhost:port instead of the pods of its Service (there are none here):
// the Service becomes an ExternalName for localhost, which the aggregator
// dials at the APIService's port, still checking the manager's certificate
// for the Service's name.
func pointInspectionAt(ctx context.Context, t *testing.T, c kubernetes.Interface, cfg *rest.Config, ns, service string, port int) {
	t.Helper()
	svc, err := c.CoreV1().Services(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: svc.Spec.Ports}
	if _, err := c.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"service":{"port":%d}}}`, port)
	if _, err := dyn.Resource(apiServicesResource).Patch(ctx, inspectionAPIService, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitInspectionAvailable waits until the aggregator reaches the inspection
// API (the manager put its CA into the APIService).
func waitInspectionAvailable(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var last *unstructured.Unstructured
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last, err = dyn.Resource(apiServicesResource).Get(ctx, inspectionAPIService, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(last.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("APIService %s not Available in 1m: %v (status %v)", inspectionAPIService, err, last.Object["status"])
	}
}

// checkInspectionAsTenant: a tenant who may use Jobs in one namespace and
// nothing else — no Secret anywhere, nothing on any worker — describes and
// reads the logs of their own Job on its worker through the manager; another
// tenant's Job, in their namespace or passed off as theirs, and another
// Job's pod are refused; a namespace administrator whom the installation
// withholds the log right (inspection.logs.aggregateToDefaultRoles=false)
// describes but is refused the logs in the API server's words; a followed
// log ends with its pod; one user's log streams are bounded.
func checkInspectionAsTenant(ctx context.Context, t *testing.T, d *dispatchEnv, kubeconfig string, workers map[string]kubernetes.Interface) {
	const tenant, nsAdmin = "tenant-t", "team-admin"
	admin := d.manager
	own, other := d.optedInNamespace(ctx, t), d.optedInNamespace(ctx, t)
	grant := func(ns, user string, role rbacv1.RoleRef) {
		t.Helper()
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: user + "-"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:    role,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant's rights: Jobs, their pods, their logs and Events in their
	// namespace (what kubectl describe and logs of pods take), and the
	// chart's inspection roles there; a second tenant has the same but
	// pods and their logs.
	jobRules := []rbacv1.PolicyRule{
		{APIGroups: []string{batchv1.GroupName}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
	}
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get"}}}
	for name, rules := range map[string][]rbacv1.PolicyRule{"job-user": append(slices.Clone(jobRules), podRules...), "job-user-without-pods": jobRules} {
		if _, err := admin.RbacV1().Roles(own).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const withoutPods = "tenant-without-pods"
	grant(own, tenant, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "job-user"})
	grant(own, withoutPods, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "job-user-without-pods"})
	for _, user := range []string{tenant, withoutPods} {
		grant(own, user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jobferry-manager-inspection"})
		grant(own, user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jobferry-manager-inspection-logs"})
	}
	// The namespace's administrator: the built-in admin role, into which
	// the chart aggregates describe, and (here) not logs.
	grant(own, nsAdmin, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"})

	as := func(user string) kubernetes.Interface {
		cfg := d.Manager.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tenantClient := as(tenant)
	for _, ns := range []string{own, metav1.NamespaceAll, "jobferry-system"} {
		for _, verb := range []string{"get", "list"} {
			review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: tenant, Groups: []string{"system:authenticated"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed {
				t.Fatalf("the tenant may %s Secrets in %q: the test's tenant must have no Secret rights", verb, ns)
			}
		}
	}

	// The tenant's Jobs, created as the tenant; another tenant's Job.
	create := func(c kubernetes.Interface, j *batchv1.Job) *batchv1.Job {
		t.Helper()
		if _, err := c.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pollJob(ctx, t, admin, j.Namespace, j.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	}
	long := create(tenantClient, sleepJob(own, "long", time.Hour))
	theirs := create(admin, sleepJob(other, "theirs", time.Hour))
	worker := long.Annotations[v1alpha1.WorkerAnnotation]
	wantLog := strings.Join(localcluster.ContainerLogLines(worker), "\n") + "\n"
	asTenant := []string{"-n", own, "--as", tenant}

	described := mustPlugin(ctx, t, kubeconfig, append([]string{"describe", "job", "long"}, asTenant...)...)
	t.Logf("kubectl jobferry describe job long -n %s --as %s:\n%s", own, tenant, described)
	pods, err := workers[worker].CoreV1().Pods(own).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pods of the tenant's namespace on %s: %v, %v", worker, pods, err)
	}
	if !containsAll(described, "Worker:       "+worker, "Mirror on worker "+worker, pods.Items[0].Name, "Running", "Scheduled", "pod/"+pods.Items[0].Name) {
		t.Errorf("describe as the tenant does not show the worker's pod %s and its Events", pods.Items[0].Name)
	}
	logs := mustPlugin(ctx, t, kubeconfig, append([]string{"logs", "job", "long"}, asTenant...)...)
	t.Logf("kubectl jobferry logs job long -n %s --as %s:\n%s", own, tenant, logs)
	if logs != wantLog {
		t.Errorf("logs as the tenant = %q, want %s's container log %q", logs, worker, wantLog)
	}

	t.Run("another tenant's Job", func(t *testing.T) {
		out, err := plugin(ctx, t, kubeconfig, "describe", "job", "theirs", "-n", other, "--as", tenant)
		want := fmt.Sprintf(`jobs.batch "theirs" is forbidden: User %q cannot get resource "jobs" in API group "batch" in the namespace %q`, tenant, other)
		t.Logf("kubectl jobferry describe job theirs -n %s --as %s: %s", other, tenant, strings.TrimSpace(out))
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("describe of another namespace's Job: %v, want %s", err, want)
		}
		if out, err := plugin(ctx, t, kubeconfig, "logs", "job", "theirs", "-n", other, "--as", tenant); err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("logs of another namespace's Job: %v\n%s", err, out)
		}
		// Straight to the API: the API server refuses it before the manager.
		raw := tenantClient.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(other, "theirs", "")).Do(ctx)
		if err := raw.Error(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot get resource "jobs" in API group "inspection.jobferry.dev"`) {
			t.Errorf("GET the inspection of another namespace's Job: %v", err)
		}
		// Its name in the tenant's namespace is no way to it.
		raw = tenantClient.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(own, theirs.Name, "")).Do(ctx)
		if err := raw.Error(); !apierrors.IsNotFound(err) {
			t.Errorf("GET the other tenant's Job name in the tenant's namespace: %v, want NotFound", err)
		}
		// Nor is a pod of theirs passed as a pod of the tenant's Job.
		theirPods, err := workers[theirs.Annotations[v1alpha1.WorkerAnnotation]].CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
		if err != nil || len(theirPods.Items) != 1 {
			t.Fatalf("the other tenant's pods: %v, %v", theirPods, err)
		}
		crafted := tenantClient.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(own, "long", inspectionv1alpha1.LogSubresource)).
			Param(inspectionv1alpha1.LogPod, theirPods.Items[0].Name).Do(ctx)
		if err := crafted.Error(); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "is not a pod of the Job's mirror") {
			t.Errorf("logs of the tenant's Job naming the other tenant's pod %s: %v", theirPods.Items[0].Name, err)
		}
	})

	// What kubectl describe and logs of the pods would take, the
	// inspection takes too (issue 44 item 4).
	t.Run("a tenant who may not get pods", func(t *testing.T) {
		for verb, want := range map[string]string{
			"describe": fmt.Sprintf(`pods is forbidden: User %q cannot get resource "pods" in API group "" in the namespace %q`, withoutPods, own),
			"logs":     fmt.Sprintf(`pods/log is forbidden: User %q cannot get resource "pods/log" in API group "" in the namespace %q`, withoutPods, own),
		} {
			// describe shows the manager's side and says why not the
			// worker's; logs fails.
			out, err := plugin(ctx, t, kubeconfig, verb, "job", "long", "-n", own, "--as", withoutPods)
			t.Logf("kubectl jobferry %s job long -n %s --as %s: %s", verb, own, withoutPods, strings.TrimSpace(out))
			if (verb == "logs" && err == nil) || !containsAll(out, want, "the built-in view, edit and admin roles grant these rights") {
				t.Errorf("%s without the pods' rights: %v, want %s", verb, err, want)
			}
		}
	})

	// A pod someone on the worker labelled as the mirror's is neither
	// shown nor its log read: only the pods the mirror controls are.
	t.Run("a pod labelled as the mirror's", func(t *testing.T) {
		w := workers[worker]
		mirror, err := w.BatchV1().Jobs(own).Get(ctx, long.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Controlled by a ConfigMap of its maker's, so the worker's Job
		// controller does not adopt it (an orphan with the label it
		// would), nor the garbage collector delete it.
		decoy, err := w.CoreV1().ConfigMaps(own).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "decoy"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		planted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "planted", Labels: map[string]string{batchv1.ControllerUidLabel: string(mirror.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: decoy.Name, UID: decoy.UID, Controller: ptrTo(true)}}},
			Spec: corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		if _, err := w.CoreV1().Pods(own).Create(ctx, planted, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		described := mustPlugin(ctx, t, kubeconfig, append([]string{"describe", "job", "long"}, asTenant...)...)
		if strings.Contains(described, "planted") {
			t.Errorf("describe shows the planted pod:\n%s", described)
		}
		crafted := tenantClient.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(own, "long", inspectionv1alpha1.LogSubresource)).
			Param(inspectionv1alpha1.LogPod, "planted").Do(ctx)
		if err := crafted.Error(); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `pod "planted" is not a pod of the Job's mirror`) {
			t.Errorf("logs of the planted pod: %v", err)
		}
	})

	t.Run("an administrator without the log right", func(t *testing.T) {
		if out := mustPlugin(ctx, t, kubeconfig, "describe", "job", "long", "-n", own, "--as", nsAdmin); !strings.Contains(out, "Mirror on worker "+worker) {
			t.Errorf("describe as the namespace's administrator:\n%s", out)
		}
		out, err := plugin(ctx, t, kubeconfig, "logs", "job", "long", "-n", own, "--as", nsAdmin)
		want := fmt.Sprintf(`User %q cannot get resource "jobs/log" in API group "inspection.jobferry.dev" in the namespace %q`, nsAdmin, own)
		t.Logf("kubectl jobferry logs job long -n %s --as %s: %s", own, nsAdmin, strings.TrimSpace(out))
		if err == nil || !containsAll(out, want, "jobferry-manager-inspection-logs") {
			t.Errorf("logs as an administrator the log right is withheld from: %v, want %s and the role that grants it", err, want)
		}
	})

	t.Run("explain", func(t *testing.T) {
		checkExplain(ctx, t, kubeconfig, own, tenant, nsAdmin, grant)
	})

	t.Run("a followed log ends with its pod", func(t *testing.T) {
		short := create(tenantClient, sleepJob(own, "short", 5*time.Second))
		followCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		start := time.Now()
		out, err := plugin(followCtx, t, kubeconfig, append([]string{"logs", "job", short.Name, "-f"}, asTenant...)...)
		if err != nil {
			t.Fatalf("logs -f of a Job whose pod ends: %v", err)
		}
		on := short.Annotations[v1alpha1.WorkerAnnotation]
		pods, err := workers[on].CoreV1().Pods(own).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + short.Name})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the pods of %s on %s: %v, %v", short.Name, on, pods, err)
		}
		if out != strings.Join(localcluster.ContainerLogLines(on), "\n")+"\n" || pods.Items[0].Status.Phase != corev1.PodSucceeded {
			t.Errorf("logs -f printed %q and ended after %s, its pod %s", out, time.Since(start).Round(time.Second), pods.Items[0].Status.Phase)
		}
		t.Logf("logs -f of a pod of 5 s ended by itself after %s", time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("one user's log streams are bounded", func(t *testing.T) {
		bin, err := localcluster.BinDir()
		if err != nil {
			t.Fatal(err)
		}
		followCtx, stop := context.WithCancel(ctx)
		defer stop()
		var running []*exec.Cmd
		outputs := make([]*follow.Buffer, 4)
		for i := range outputs {
			outputs[i] = &follow.Buffer{}
			cmd := exec.CommandContext(followCtx, filepath.Join(bin, "kubectl-jobferry"), append([]string{"logs", "job", "long", "-f", "--kubeconfig", kubeconfig}, asTenant...)...)
			cmd.Stdout = outputs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			running = append(running, cmd)
		}
		defer func() {
			stop()
			for _, cmd := range running {
				if err := cmd.Wait(); err != nil && followCtx.Err() == nil {
					t.Error(err)
				}
			}
		}()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			for _, o := range outputs {
				if o.String() != wantLog {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			t.Fatalf("4 followed logs did not all stream: %v", err)
		}
		out, err := plugin(ctx, t, kubeconfig, append([]string{"logs", "job", "long", "-f"}, asTenant...)...)
		if err == nil || !strings.Contains(out, tenant+" has 4 log streams open, the most one user may") {
			t.Errorf("a fifth followed log of one user: %v\n%s", err, out)
		}
		var statusErr *apierrors.StatusError
		if err := tenantClient.Discovery().RESTClient().Get().AbsPath(inspectionv1alpha1.Path(own, "long", inspectionv1alpha1.LogSubresource)).Do(ctx).Error(); !errors.As(err, &statusErr) || statusErr.Status().Code != 429 {
			t.Errorf("a fifth log request straight to the API: %v, want 429", err)
		}
	})
}

// checkExplain: kubectl jobferry explain, answered by the manager with the
// caller's rights: a Job both workers would take goes to one and the other
// says it would take it too; a Job of 1,000 CPUs goes nowhere, each worker
// naming its nearest change; a stored Job is explained as placed already;
// the built-in admin role may explain (the chart aggregates it); a user
// who may ask but may not create Jobs there is refused by the manager.
func checkExplain(ctx context.Context, t *testing.T, kubeconfig, ns, tenant, nsAdmin string, grant func(ns, user string, role rbacv1.RoleRef)) {
	grant(ns, tenant, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jobferry-manager-placements"})
	const askingOnly = "explain-without-jobs"
	grant(ns, askingOnly, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jobferry-manager-placements"})
	dir := t.TempDir()
	file := func(name, cpu string) string {
		job := sleepJob("", name, time.Minute)
		job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resourceQuantity(cpu)
		data, err := yaml.Marshal(job)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	small, huge := file("small", "100m"), file("huge", "1000")

	// Polled: the tenant's roles reach the API server's authorizer within
	// moments.
	var out string
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = plugin(ctx, t, kubeconfig, "explain", "-f", small, "-n", ns, "--as", tenant)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("explain -f small.yaml as the tenant:\n%s", out)
	}
	t.Logf("kubectl jobferry explain -f small.yaml -n %s --as %s (a Job both workers take):\n%s", ns, tenant, out)
	var chosen, other string
	for _, w := range []string{"worker-1", "worker-2"} {
		if strings.Contains(out, "would go to worker "+w+", pool ") {
			chosen = w
		} else {
			other = w
		}
	}
	if chosen == "" || !containsAll(out, chosen+"  chosen", other+"  would take it", "the Job is not created yet") {
		t.Errorf("explain of a Job both workers take: want one chosen and the other taking it too")
	}

	out = mustPlugin(ctx, t, kubeconfig, "explain", "-f", huge, "-n", ns, "--as", tenant)
	t.Logf("kubectl jobferry explain -f huge.yaml -n %s --as %s (a Job of 1,000 CPUs):\n%s", ns, tenant, out)
	if !containsAll(out, "Job "+ns+"/huge would go nowhere now", "No worker could ever run it",
		"worker-1  insufficient_capacity", "worker-2  insufficient_capacity", "change: a Job that asks for less at once") {
		t.Errorf("explain of a Job no worker could hold: want nowhere, never, and each worker's change")
	}

	out = mustPlugin(ctx, t, kubeconfig, "explain", "job", "long", "-n", ns, "--as", tenant, "-o", "json")
	var stored inspectionv1alpha1.PlacementExplanation
	if err := json.Unmarshal([]byte(out), &stored); err != nil {
		t.Fatalf("explain job long -o json: %v\n%s", err, out)
	}
	if stored.Name != "long" || stored.UID == "" || stored.Worker == "" || !strings.Contains(strings.Join(stored.Notes, "\n"), "is placed on worker") {
		t.Errorf("explain of the tenant's placed Job: %s", out)
	}

	if out := mustPlugin(ctx, t, kubeconfig, "explain", "-f", small, "-n", ns, "--as", nsAdmin); !strings.Contains(out, "would go to worker") {
		t.Errorf("explain as the namespace's administrator (admin, into which the chart aggregates placements):\n%s", out)
	}
	out, err := plugin(ctx, t, kubeconfig, "explain", "-f", small, "-n", ns, "--as", askingOnly)
	t.Logf("kubectl jobferry explain -f small.yaml -n %s --as %s: %s", ns, askingOnly, strings.TrimSpace(out))
	want := fmt.Sprintf(`User %q cannot create resource "jobs" in API group "batch" in the namespace %q (a placement is explained to who may create the Job)`, askingOnly, ns)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("explain by a user who may not create Jobs there: %v, want %s", err, want)
	}
}
