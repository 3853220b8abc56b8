//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

const (
	psaEnforce = "pod-security.kubernetes.io/enforce"
	tenantUser = "alice"
)

// tenantClient is the manager as the tenant alice (group team-a) sees it,
// through impersonation: she may create, read, update and delete Jobs in exactly the
// namespaces given, nothing else.
func tenantClient(ctx context.Context, t *testing.T, d *dispatchEnv, namespaces ...string) kubernetes.Interface {
	t.Helper()
	bindJobAuthor(ctx, t, d, namespaces...)
	return tenantClientWithWarnings(t, d, nil)
}

// bindJobAuthor lets alice create, read and delete Jobs in the namespaces.
func bindJobAuthor(ctx context.Context, t *testing.T, d *dispatchEnv, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-author"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "watch", "update", "delete"},
		}}}
		if _, err := d.manager.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-author-alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}},
		}
		if _, err := d.manager.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = d.manager.RbacV1().RoleBindings(ns).Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
			_ = d.manager.RbacV1().Roles(ns).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
	}
}

func managerNamespace(ctx context.Context, t *testing.T, d *dispatchEnv, name string, labels map[string]string) {
	t.Helper()
	if _, err := d.manager.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restrictedJob runs a pod that passes Pod Security's restricted level.
func restrictedJob(ns, name string) *batchv1.Job {
	job := sleepJob(ns, name, time.Second)
	spec := &job.Spec.Template.Spec
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	return job
}

// privilegedJob runs a privileged pod with the node's root filesystem mounted.
func privilegedJob(ns, name string) *batchv1.Job {
	job := sleepJob(ns, name, time.Second)
	spec := &job.Spec.Template.Spec
	spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
	return job
}

func dispatched(j *batchv1.Job) *batchv1.Job {
	j.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
	return j
}

// A tenant gets on a worker exactly what they may do on the manager. alice
// may create Jobs in team-a (opted in, Pod Security restricted), team-a-local
// (not opted in) and team-c (opted in, restricted) — and, by an RBAC mistake
// the policy must survive, in kube-system. Acting as her: a Job naming
// jobferry in team-a-local is refused (namespace opt-in), a privileged
// host-path pod in team-a is refused with Pod Security's own message, a Job
// in kube-system is refused (reserved namespace), even with kube-system
// labelled for dispatch; a restricted Job from team-a is dispatched, its
// namespace created on the worker with the restricted label, and completes.
// A worker whose team-c enforces only baseline is not chosen, the placement
// Event saying why. With the validating webhook gone, a Job that slips in is
// never dispatched and gets a Warning Event naming the rule (the oversized
// one, OverBudget).
func TestTenantStaysInTheirLane(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	managerNamespace(ctx, t, d, "team-a", map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, psaEnforce: "restricted"})
	managerNamespace(ctx, t, d, "team-a-local", nil)
	managerNamespace(ctx, t, d, "team-c", map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, psaEnforce: "restricted"})
	managerNamespace(ctx, t, d, "team-d", map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, psaEnforce: "baseline", "pod-security.kubernetes.io/warn": "restricted"})
	alice := tenantClient(ctx, t, d, "team-a", "team-a-local", "team-c", "team-d", "kube-system")

	refused := func(job *batchv1.Job, parts ...string) {
		t.Helper()
		_, err := alice.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
		if err == nil {
			t.Errorf("alice created %s/%s; want it refused mentioning %q", job.Namespace, job.Name, parts)
			return
		}
		if !containsAll(err.Error(), parts...) {
			t.Errorf("creating %s/%s: %v; want the refusal to mention %q", job.Namespace, job.Name, err, parts)
		}
		t.Logf("refused %s/%s: %v", job.Namespace, job.Name, err)
	}
	refused(dispatched(restrictedJob("team-a-local", "not-opted-in")), admission.RuleNamespaceOptIn, `namespace "team-a-local" is not opted in`, "jobferry.dev/dispatch=enabled")
	refused(privilegedJob("team-a", "privileged"), admission.RulePodSecurity, `violates PodSecurity "restricted:latest"`, `privileged (container "main" must not set securityContext.privileged=true)`, `restricted volume types (volume "host" uses restricted volume type "hostPath")`)
	refused(dispatched(restrictedJob("kube-system", "reserved")), admission.RuleReserved, `namespace "kube-system" is reserved`)
	refused(oversizedJob("team-a", "oversized"), "this Job holds more than jobferry keeps of a Job it dispatches: spec.template.spec.tolerations takes what the manager would keep of it to",
		"over its budget of 1024 entries and 64 KiB")

	// Opting kube-system in does not make it dispatch: the opt-in webhook
	// leaves its Jobs alone.
	kubeSystem, err := d.manager.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeSystem.Labels[v1alpha1.DispatchNamespaceLabel] = v1alpha1.DispatchEnabled
	if _, err := d.manager.CoreV1().Namespaces().Update(ctx, kubeSystem, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mergePatchNamespace(t, d, "kube-system", `{"metadata":{"labels":{"`+v1alpha1.DispatchNamespaceLabel+`":null}}}`)
	})
	local, err := alice.BatchV1().Jobs("kube-system").Create(ctx, restrictedJob("kube-system", "stays-local"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if local.Spec.ManagedBy != nil {
		t.Errorf("a Job in kube-system was taken for dispatch: managedBy %s", *local.Spec.ManagedBy)
	}
	if err := alice.BatchV1().Jobs("kube-system").Delete(ctx, local.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}

	// Allowed: a restricted Job from team-a runs on a worker, whose team-a
	// holds it to the same level.
	allowed, err := alice.BatchV1().Jobs("team-a").Create(ctx, restrictedJob("team-a", "allowed"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice's restricted Job in team-a was refused: %v", err)
	}
	done := pollJob(ctx, t, d.manager, "team-a", allowed.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	worker := done.Annotations[v1alpha1.WorkerAnnotation]
	workerNS, err := d.workers[worker].CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	if err != nil || workerNS.Labels[psaEnforce] != "restricted" {
		t.Errorf("namespace team-a on %s: labels %v (%v), want %s=restricted copied from the manager", worker, workerNS.Labels, err, psaEnforce)
	}

	grownWithoutWebhook := checkGrownPastItsBudget(ctx, t, d, alice)

	// team-d enforces baseline and warns at restricted: a baseline pod is
	// dispatched, with jobferry's warning besides Pod Security's own.
	warnings := &warningRecorder{}
	warned := tenantClientWithWarnings(t, d, warnings)
	if _, err := warned.BatchV1().Jobs("team-d").Create(ctx, sleepJob("team-d", "warned", time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a baseline Job in team-d was refused: %v", err)
	}
	if got := warnings.all(); !slices.ContainsFunc(got, func(w string) bool {
		return strings.HasPrefix(w, `jobferry: the pods this Job would run on a worker would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`)
	}) {
		t.Errorf("warnings %q lack jobferry's restricted-level warning", got)
	} else {
		t.Logf("warnings: %q", got)
	}
	pollJob(ctx, t, d.manager, "team-d", "warned", time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })

	// worker-1's team-c, made by its administrator, who accepted the
	// manager's Jobs in it, enforces only baseline: only worker-2 may take
	// it.
	acceptingNamespace(ctx, t, d.workers["worker-1"], "team-c", managerID(ctx, t, d.managerClient, devenv.SystemNamespace), map[string]string{psaEnforce: "baseline"})
	weaker := restrictedJob("team-c", "weaker-worker")
	if _, err := alice.BatchV1().Jobs("team-c").Create(ctx, weaker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	placed := waitEvent(ctx, t, d.manager, "team-c", weaker.Name, policy.ReasonDispatched, 30*time.Second,
		"placed on worker-2", `worker-1: its namespace team-c enforces PodSecurity "baseline:latest", weaker than "restricted:latest" on the manager`)
	t.Logf("Dispatched: %s", placed.Message)
	pollJob(ctx, t, d.manager, "team-c", weaker.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })

	// The validating webhook gone (deleted, or not yet registered): what
	// slips in is still never dispatched.
	validating, err := d.manager.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "jobferry-validate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.manager.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, validating.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		restored := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validating.Name}, Webhooks: validating.Webhooks}
		_, err := d.manager.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), restored, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Errorf("restoring the validating webhook: %v", err)
		}
	}
	t.Cleanup(restore)
	slipped := map[string]string{"team-a-local": admission.RuleNamespaceOptIn, "team-a": admission.RulePodSecurity}
	jobs := map[string]*batchv1.Job{"team-a-local": dispatched(restrictedJob("team-a-local", "slipped-in")), "team-a": privilegedJob("team-a", "slipped-in")}
	for ns, job := range jobs {
		var created *batchv1.Job
		// The API server may still call the webhook for a moment.
		for deadline := time.Now().Add(30 * time.Second); ; {
			created, err = alice.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("creating %s/%s without the webhook: %v", ns, job.Name, err)
		}
		event := waitEvent(ctx, t, d.manager, ns, job.Name, policy.ReasonNotAllowed, 30*time.Second, "rule: "+slipped[ns])
		t.Logf("%s/%s: %s: %s", ns, job.Name, event.Reason, event.Message)
		got := pollJob(ctx, t, d.manager, ns, job.Name, 10*time.Second, "showing why it is not dispatched", func(j *batchv1.Job) bool {
			c := suspendedCondition(j)
			return c != nil && c.Reason == policy.ReasonNotAllowed
		})
		if w := got.Annotations[v1alpha1.WorkerAnnotation]; w != "" || created == nil {
			t.Errorf("%s/%s was dispatched to %s", ns, job.Name, w)
		}
	}
	// A Job over what the manager keeps of one, slipped in: kept as its
	// identity only, never dispatched, and its author told why.
	var oversized *batchv1.Job
	for deadline := time.Now().Add(30 * time.Second); ; {
		oversized, err = alice.BatchV1().Jobs("team-a").Create(ctx, oversizedJob("team-a", "slipped-in-oversized"), metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("creating an oversized Job without the webhook: %v", err)
	}
	event := waitEvent(ctx, t, d.manager, "team-a", oversized.Name, policy.ReasonOverBudget, 30*time.Second,
		"this Job holds more than jobferry keeps of one: spec.template.spec.tolerations takes", "over its budget of 2048 entries and 128 KiB", "jobferry does not act on it")
	t.Logf("team-a/%s: %s: %s", oversized.Name, event.Reason, event.Message)
	jobs["team-a-oversized"] = oversized
	grownWithoutWebhook()
	for name, c := range d.workers {
		for _, job := range jobs {
			if _, err := c.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
				t.Errorf("a mirror of %s/%s exists on %s", job.Namespace, job.Name, name)
			}
		}
	}
	restore()
}

// checkGrownPastItsBudget: a tenant who grows a running Job past what the
// manager keeps of one (its labels) would leave the manager its identity
// only, so no later change of it (its user's suspend, Kueue's preemption)
// would reach its mirror. The budget webhook refuses the update, naming the
// field. It fails open, so the returned check, run while the validating
// webhooks are gone, makes the same update: the mirror is suspended instead
// of running on out of reach, the Job says why, and the mirror runs again
// once the Job holds less.
func checkGrownPastItsBudget(ctx context.Context, t *testing.T, d *dispatchEnv, alice kubernetes.Interface) (withoutWebhook func()) {
	t.Helper()
	job := restrictedJob("team-a", "grown")
	job.Spec.Template.Annotations[completeDelayAnnotation] = (10 * time.Minute).String()
	if _, err := alice.BatchV1().Jobs("team-a").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = alice.BatchV1().Jobs("team-a").Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	placed := pollJob(ctx, t, d.manager, "team-a", job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active > 0 })
	worker := d.workers[placed.Annotations[v1alpha1.WorkerAnnotation]]
	relabel := func(n int) error {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			j, err := alice.BatchV1().Jobs("team-a").Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range j.Labels {
				if strings.HasPrefix(k, "example.com/") {
					delete(j.Labels, k)
				}
			}
			if j.Labels == nil {
				j.Labels = map[string]string{}
			}
			for i := range n {
				j.Labels[fmt.Sprintf("example.com/l-%04d", i)] = "x"
			}
			_, err = alice.BatchV1().Jobs("team-a").Update(ctx, j, metav1.UpdateOptions{})
			if !apierrors.IsConflict(err) || time.Now().After(deadline) {
				return err
			}
		}
	}
	err := relabel(2100)
	if err == nil || !containsAll(err.Error(), "this change would make the Job hold more than jobferry keeps of one: metadata.labels takes", "over its budget of 2048 entries", "suspend its mirror") {
		t.Fatalf("alice's update taking %s past the budget: %v; want the budget webhook's refusal", job.Name, err)
	}
	t.Logf("refused: %v", err)
	return func() {
		t.Helper()
		if err := relabel(2100); err != nil {
			t.Fatalf("alice setting 2100 labels on %s without the webhooks: %v", job.Name, err)
		}
		pollJob(ctx, t, worker, "team-a", job.Name, 30*time.Second, "its mirror suspended", func(m *batchv1.Job) bool { return ptr.Deref(m.Spec.Suspend, false) })
		event := waitEvent(ctx, t, d.manager, "team-a", job.Name, policy.ReasonOverBudget, 30*time.Second,
			"metadata.labels takes", "a mirror of it that runs is suspended")
		t.Logf("team-a/%s: %s: %s", job.Name, event.Reason, event.Message)
		if err := relabel(0); err != nil {
			t.Fatalf("alice removing the labels of %s: %v", job.Name, err)
		}
		pollJob(ctx, t, worker, "team-a", job.Name, 30*time.Second, "its mirror resumed", func(m *batchv1.Job) bool { return !ptr.Deref(m.Spec.Suspend, false) })
	}
}

// oversizedJob is a restricted Job holding more than jobferry keeps of
// one, in tolerations: more of them than cachebudget.ManagerJobCached
// counts entries.
func oversizedJob(ns, name string) *batchv1.Job {
	job := dispatched(restrictedJob(ns, name))
	for i := range 2100 {
		job.Spec.Template.Spec.Tolerations = append(job.Spec.Template.Spec.Tolerations,
			corev1.Toleration{Key: fmt.Sprintf("example.com/t-%04d", i), Operator: corev1.TolerationOpExists})
	}
	return job
}

// warningRecorder keeps the warnings the API server returns.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warnings)
}

// tenantClientWithWarnings is alice's client (her rights already bound by
// tenantClient), recording the warnings she is shown when rec is set.
func tenantClientWithWarnings(t *testing.T, d *dispatchEnv, rec *warningRecorder) kubernetes.Interface {
	t.Helper()
	cfg := d.Manager.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"team-a", "system:authenticated"}}
	if rec != nil {
		cfg.WarningHandler = rec
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mergePatchNamespace(t *testing.T, d *dispatchEnv, name, patch string) {
	t.Helper()
	if _, err := d.manager.CoreV1().Namespaces().Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Error(err)
	}
}
