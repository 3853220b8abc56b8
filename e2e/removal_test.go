//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// checkRemoval takes the real-node tier's installation apart as a platform
// team would: the manager's uninstall refuses while workers are registered,
// namespaces opted in and a Job runs, and a rollback undoes the refusal;
// `kubectl jobferry remove` shows its plan, waits for that Job and its
// mirror, then removes each worker; the namespaces are taken out; the
// manager uninstalls, leaving nothing that fails or refuses a request;
// plain Jobs run again without jobferry; the worker charts uninstall.
func checkRemoval(ctx context.Context, t *testing.T, d *dispatchEnv, env *localcluster.Environment, userKubeconfig string) {
	const ns = devenv.SystemNamespace
	admin := d.manager
	jobNS := d.optedInNamespace(ctx, t)
	d.dispatchTo(ctx, t, realJob(jobNS, "long", "sleep 3600"), "worker-1")
	pollJob(ctx, t, admin, jobNS, "long", 2*time.Minute, "running", func(j *batchv1.Job) bool { return ptr.Deref(j.Status.Ready, 0) > 0 })

	// The manager's uninstall refuses, naming the workers, the opted-in
	// namespaces and the Job; nothing is removed, and a rollback to the
	// revision it names makes the release deployed again.
	out, err := helmMayFail(ctx, t, "helm", env.Manager.KubeconfigPath, "uninstall", devenv.ManagerRelease, "-n", ns, "--wait", "--timeout", "2m")
	if err == nil {
		t.Fatalf("helm uninstall of the manager succeeded while Job %s/long ran:\n%s", jobNS, out)
	}
	t.Logf("helm uninstall jobferry-manager while %s/long runs (refused): %v\n%s", jobNS, err, out)
	hookLog := kubectl(ctx, t, env.Manager.KubeconfigPath, "logs", "-n", ns, "job/jobferry-manager-uninstall-check")
	t.Logf("the uninstall check's log:\n%s", hookLog)
	for _, want := range []string{"- 2 workers are registered", "  worker-1\n  worker-2\n", "namespaces are opted in", "  " + jobNS + "\n",
		"- 1 Jobs jobferry manages are unfinished", jobNS + "/long (Running, on worker worker-1)", "`helm rollback jobferry-manager 1 -n " + ns + "`"} {
		if !strings.Contains(hookLog, want) {
			t.Errorf("the uninstall check's log lacks %q", want)
		}
	}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "jobferry-manager-opt-in", metav1.GetOptions{}); err != nil {
		t.Errorf("after the refused uninstall the manager's opt-in webhook configuration: %v", err)
	}
	helm(ctx, t, env.Manager.KubeconfigPath, "rollback", devenv.ManagerRelease, "1", "-n", ns, "--wait", "--timeout", "2m")
	if status := helm(ctx, t, env.Manager.KubeconfigPath, "status", devenv.ManagerRelease, "-n", ns); !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("after the rollback the refusal names, the release is not deployed:\n%s", status)
	}

	// remove --dry-run: the plan, from both sides, nothing changed.
	plan := mustPlugin(ctx, t, userKubeconfig, "remove", "worker-1", "--dry-run")
	t.Logf("kubectl jobferry remove worker-1 --dry-run:\n%s", plan)
	for _, want := range []string{"- cordon workercluster/worker-1", "1 unfinished Jobs placed on worker-1", jobNS + "/long (Running",
		"1 mirrors still running on worker-1", "- delete secret/worker-1-kubeconfig from " + ns} {
		if !strings.Contains(plan, want) {
			t.Errorf("the dry run's plan lacks %q", want)
		}
	}
	wc := &v1alpha1.WorkerCluster{}
	if err := d.managerClient.Get(ctx, client.ObjectKey{Name: "worker-1"}, wc); err != nil || wc.Spec.Cordoned {
		t.Errorf("after remove --dry-run worker-1: %v, cordoned %v; want it untouched", err, wc.Spec.Cordoned)
	}

	// remove gives up while the Job runs: cordoned, still registered.
	out, err = plugin(ctx, t, userKubeconfig, "remove", "worker-1", "--timeout", "10s")
	if err == nil || !strings.Contains(out, "still unfinished on worker-1") || !strings.Contains(out, jobNS+"/long") {
		t.Errorf("remove worker-1 while %s/long runs: %v\n%s\nwant it to stop, naming the Job", jobNS, err, out)
	}
	if err := d.managerClient.Get(ctx, client.ObjectKey{Name: "worker-1"}, wc); err != nil || !wc.Spec.Cordoned {
		t.Errorf("after remove gave up, worker-1: %v, cordoned %v; want it kept, cordoned", err, wc.Spec.Cordoned)
	}

	// A tenant forges a finished status on the manager Job (the status
	// subresource is theirs to write): the manager side then shows nothing
	// unfinished, but the mirror still runs on worker-1, and remove,
	// reading the worker, still gives up, naming it.
	forged, err := admin.BatchV1().Jobs(jobNS).Get(ctx, "long", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := metav1.Now()
	forged.Status.Active, forged.Status.Ready = 0, ptr.To[int32](0)
	forged.Status.Conditions = append(forged.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "Forged"},
		batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "Forged"})
	if _, err := admin.BatchV1().Jobs(jobNS).UpdateStatus(ctx, forged, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("forging a finished status on %s/long: %v", jobNS, err)
	}
	out, err = plugin(ctx, t, userKubeconfig, "remove", "worker-1", "--timeout", "15s")
	if err == nil || !strings.Contains(out, "1 mirrors still running on worker-1:\n  "+jobNS+"/long\n") || strings.Contains(out, "unfinished Jobs placed") {
		t.Errorf("remove worker-1 with %s/long forged finished on the manager and its mirror running: %v\n%s\nwant it to stop, naming the mirror only", jobNS, err, out)
	}
	if m, err := d.workers["worker-1"].BatchV1().Jobs(jobNS).Get(ctx, "long", metav1.GetOptions{}); err != nil {
		t.Errorf("the mirror of %s/long after remove refused: %v; want it still running (else the refusal proves nothing)", jobNS, err)
	} else if m.Status.Active == 0 {
		t.Errorf("the mirror of %s/long after remove refused has no active pod; want it still running (else the refusal proves nothing)", jobNS)
	}

	// Once the Job is deleted, each worker is removed, and nothing of the
	// Job runs on worker-1 any more.
	if err := admin.BatchV1().Jobs(jobNS).Delete(ctx, "long", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	for _, worker := range []string{"worker-1", "worker-2"} {
		removed := mustPlugin(ctx, t, userKubeconfig, "remove", worker, "--timeout", "2m")
		t.Logf("kubectl jobferry remove %s:\n%s", worker, removed)
		for _, want := range []string{"workercluster/" + worker + " deleted", "secret/" + worker + "-kubeconfig deleted", "helm uninstall jobferry-worker -n jobferry-system --kube-context " + worker} {
			if !strings.Contains(removed, want) {
				t.Errorf("remove %s printed no %q", worker, want)
			}
		}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: worker}, &v1alpha1.WorkerCluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("WorkerCluster %s after remove: %v, want it gone", worker, err)
		}
		if _, err := admin.CoreV1().Secrets(ns).Get(ctx, worker+"-kubeconfig", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s-kubeconfig after remove: %v, want it gone", worker, err)
		}
	}
	mirrors, err := d.workers["worker-1"].BatchV1().Jobs(jobNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mirrors.Items {
		if m.Name == "long" && m.DeletionTimestamp == nil && hasCondition(&m, batchv1.JobComplete) == nil && hasCondition(&m, batchv1.JobFailed) == nil {
			t.Errorf("worker-1 was removed while the mirror of %s/long ran there (active %d)", jobNS, m.Status.Active)
		}
	}

	// The namespaces are taken out of dispatch.
	kubectl(ctx, t, env.Manager.KubeconfigPath, "label", "namespace", "-l", v1alpha1.DispatchNamespaceLabel+"="+v1alpha1.DispatchEnabled, v1alpha1.DispatchNamespaceLabel+"-")

	// The manager uninstalls; nothing of it intercepts a request any more.
	t.Logf("helm uninstall jobferry-manager:\n%s", helm(ctx, t, env.Manager.KubeconfigPath, "uninstall", devenv.ManagerRelease, "-n", ns, "--wait", "--timeout", "2m"))
	state := kubectl(ctx, t, env.Manager.KubeconfigPath, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices,validatingadmissionpolicies,validatingadmissionpolicybindings,jobs", "-A")
	t.Logf("the manager cluster after the uninstall:\n%s", state)
	checkNothingOfRelease(ctx, t, env.Manager.RESTConfig(), "jobferry-manager")
	if _, err := admin.BatchV1().Jobs(ns).Get(ctx, "jobferry-manager-uninstall-check", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the uninstall check's Job after it passed: %v, want it deleted (hook-succeeded)", err)
	}
	// A Job in a namespace that was opted in runs as any Job does.
	plain, err := admin.BatchV1().Jobs(jobNS).Create(ctx, realJob(jobNS, "after-uninstall", "echo plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Job after the manager's uninstall: %v", err)
	}
	if plain.Spec.ManagedBy != nil {
		t.Errorf("a Job created after the uninstall has spec.managedBy %q", *plain.Spec.ManagedBy)
	}
	pollJob(ctx, t, admin, jobNS, "after-uninstall", 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })

	// The worker charts uninstall (one with helm 4) and leave none of
	// their policies; what jobferry ran there is listed.
	for i, w := range env.Workers {
		helmBinary := "helm"
		if i == 1 {
			helmBinary = "helm4"
		}
		t.Logf("%s uninstall jobferry-worker on %s:\n%s", helmBinary, w.Name, helmWith(ctx, t, helmBinary, w.KubeconfigPath, "uninstall", "jobferry-worker", "-n", ns, "--wait", "--timeout", "2m"))
		checkNothingOfRelease(ctx, t, w.RESTConfig(), "jobferry-worker")
		t.Logf("%s after the uninstall:\n%s", w.Name, kubectl(ctx, t, w.KubeconfigPath, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices,validatingadmissionpolicies,validatingadmissionpolicybindings,jobs", "-A"))
	}
}

// checkNothingOfRelease fails for every webhook configuration, APIService
// or admission policy (or binding) of the helm release left in the cluster.
func checkNothingOfRelease(ctx context.Context, t *testing.T, cfg *rest.Config, release string) {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	selector := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	var left []string
	add := func(kind string, err error, names ...string) {
		if err != nil {
			t.Errorf("listing %s: %v", kind, err)
		}
		for _, n := range names {
			left = append(left, kind+"/"+n)
		}
	}
	admission := c.AdmissionregistrationV1()
	mutating, err := admission.MutatingWebhookConfigurations().List(ctx, selector)
	add("mutatingwebhookconfiguration", err, namesOf(mutating.Items)...)
	validating, err := admission.ValidatingWebhookConfigurations().List(ctx, selector)
	add("validatingwebhookconfiguration", err, namesOf(validating.Items)...)
	policies, err := admission.ValidatingAdmissionPolicies().List(ctx, selector)
	add("validatingadmissionpolicy", err, namesOf(policies.Items)...)
	bindings, err := admission.ValidatingAdmissionPolicyBindings().List(ctx, selector)
	add("validatingadmissionpolicybinding", err, namesOf(bindings.Items)...)
	// APIServices, whatever their labels: none of jobferry's may be served
	// by a Service (the API server's own, Local, serves the CRDs' group).
	apiServices := &unstructured.UnstructuredList{}
	apiServices.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIServiceList"})
	uc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = uc.List(ctx, apiServices)
	var jobferry []string
	for _, a := range apiServices.Items {
		if service, _, _ := unstructured.NestedMap(a.Object, "spec", "service"); service != nil && strings.HasSuffix(a.GetName(), ".jobferry.dev") {
			jobferry = append(jobferry, a.GetName())
		}
	}
	add("apiservice", err, jobferry...)
	// Discovery answers whole: no aggregated API left pointing at nothing.
	if _, _, err := c.Discovery().ServerGroupsAndResources(); err != nil {
		t.Errorf("discovery after uninstalling %s: %v", release, err)
	}
	if len(left) > 0 {
		t.Errorf("uninstalling %s left %s", release, strings.Join(left, ", "))
	}
}

// namesOf names objects.
func namesOf[T any, P interface {
	*T
	GetName() string
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}

// helmMayFail runs a helm of bin/ against a cluster: its output and error.
func helmMayFail(ctx context.Context, t *testing.T, binary, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin, err := localcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.RequireBinaries(bin, binary); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, binary), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Dir = root
	// helm keeps its cache and config under HOME; keep them out of the way.
	home := t.TempDir()
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
