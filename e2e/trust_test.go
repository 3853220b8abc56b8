//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// Issue 23: only jobferry writes jobferry's state. These tests act as the
// people who could otherwise write it: a tenant who may edit Jobs in their
// namespace of the manager (impersonated, with the verbs of the built-in
// edit role on Jobs), and a user who may edit Jobs and create Events in a
// namespace of a worker.

const workerUser = "bob"

// impersonate is a client of cfg's cluster acting as user.
func impersonate(t *testing.T, cfg *rest.Config, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindRole binds user to rules in namespace ns of cluster c, for the test.
func bindRole(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, user, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	if err := devenv.BindRole(ctx, c, ns, user, name, rules...); err != nil {
		t.Fatal(err)
	}
}

// jobEditor may do with Jobs what the built-in edit role allows.
var jobEditor = rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"},
	Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}}

// statePolicyOff deletes the binding of the state policy, so nothing but
// the manager's own seal stands between a tenant and jobferry's state, and
// waits until the API server lets a forged annotation through. The binding
// is restored when the test ends.
func statePolicyOff(ctx context.Context, t *testing.T, d *dispatchEnv, tenant kubernetes.Interface, ns string) {
	t.Helper()
	bindings := d.manager.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if err := bindings.Delete(ctx, devenv.StatePolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, binding := admission.StatePolicy(devenv.StatePolicyName, devenv.ManagerUser)
		if _, err := bindings.Create(context.Background(), binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restoring the state policy's binding: %v", err)
		}
	})
	probe := sleepJob(ns, "policy-probe", time.Second)
	probe.Spec.Suspend = ptr.To(true)
	probe.Spec.ManagedBy = ptr.To("example.com/nobody") // never dispatched
	probe.Annotations = map[string]string{v1alpha1.WorkerAnnotation: "probe"}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := tenant.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the state policy still refuses after its binding was deleted: %v", err)
	}
}

// mirrorUID is the UID of the Job's mirror on a worker, "" when none.
func mirrorUID(ctx context.Context, t *testing.T, worker kubernetes.Interface, ns, name string) types.UID {
	t.Helper()
	m, err := worker.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return m.UID
}

// updateAnnotations changes a Job's annotations as c, and returns the error.
func updateAnnotations(ctx context.Context, c kubernetes.Interface, ns, name string, change func(map[string]string)) error {
	job, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(job.Annotations)
	_, err = c.BatchV1().Jobs(ns).Update(ctx, job, metav1.UpdateOptions{})
	return err
}

// A tenant cannot steer placement or rerun a Job by writing jobferry's
// annotations: the API server refuses each attempt, naming the annotation
// (the state policy), and with the policy's binding deleted the manager
// does nothing for a Job whose state it did not write (its seal).
func TestTenantCannotWriteJobferrysState(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	// alice runs an operator that may write her Jobs' status too.
	statusWriter := rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"update", "patch"}}
	bindRole(ctx, t, d.manager, ns, tenantUser, "job-editor", jobEditor, statusWriter)
	alice := impersonate(t, d.Manager.RESTConfig(), tenantUser, "team-a")

	refused := func(err error, parts ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("accepted; want it refused saying %q", parts)
			return
		}
		if !containsAll(err.Error(), parts...) {
			t.Errorf("refused with %q; want it to say %q", err, parts)
		}
		t.Logf("refused: %v", err)
	}
	pinned := func(name, worker string, runFor time.Duration) *batchv1.Job {
		j := sleepJob(ns, name, runFor)
		j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + worker}
		return j
	}

	// At creation: a placement, an attempt, a mirror label.
	forged := pinned("forged", "worker-1", time.Second)
	forged.Annotations[v1alpha1.WorkerAnnotation] = "worker-2"
	_, err := alice.BatchV1().Jobs(ns).Create(ctx, forged, metav1.CreateOptions{})
	refused(err, "annotation jobferry.dev/worker of a Job: jobferry's own state, which only jobferry's manager may write")
	forged = pinned("forged", "worker-1", time.Second)
	forged.Labels = map[string]string{v1alpha1.DispatchAttemptLabel: "5"}
	_, err = alice.BatchV1().Jobs(ns).Create(ctx, forged, metav1.CreateOptions{})
	refused(err, "label jobferry.dev/dispatch-attempt of a Job")
	workerManaged := sleepJob(ns, "worker-managed", time.Second)
	workerManaged.Spec.ManagedBy = ptr.To(v1alpha1.WorkerManagedBy)
	_, err = alice.BatchV1().Jobs(ns).Create(ctx, workerManaged, metav1.CreateOptions{})
	refused(err, "jobferry.dev/worker", "names no controller of this cluster")

	// On a running Job: moving it, raising its attempt, removing its state.
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, pinned("running", "worker-1", 20*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, "running", time.Minute, "running on worker-1", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.WorkerAnnotation] == "worker-1" && j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	mirror := mirrorUID(ctx, t, d.workers["worker-1"], ns, "running")
	for what, change := range map[string]func(map[string]string){
		"move it":           func(a map[string]string) { a[v1alpha1.WorkerAnnotation] = "worker-2" },
		"raise its attempt": func(a map[string]string) { a[v1alpha1.DispatchAttemptAnnotation] = "2" },
		"remove its seal":   func(a map[string]string) { delete(a, v1alpha1.StateSealAnnotation) },
	} {
		t.Logf("alice tries to %s", what)
		refused(updateAnnotations(ctx, alice, ns, "running", change), "jobferry's own state, which only jobferry's manager may write")
	}
	// The status subresource is a door to the metadata too (the Job status
	// strategy keeps labels and annotations a status write changes).
	t.Logf("alice tries to raise its attempt through the status subresource")
	running, err := alice.BatchV1().Jobs(ns).Get(ctx, "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2"
	_, err = alice.BatchV1().Jobs(ns).UpdateStatus(ctx, running, metav1.UpdateOptions{})
	refused(err, "annotation jobferry.dev/dispatch-attempt of a Job: jobferry's own state, which only jobferry's manager may write")

	// The policy's binding gone (an administrator's mistake): the manager's
	// seal alone.
	statePolicyOff(ctx, t, d, alice, ns)
	if err := updateAnnotations(ctx, alice, ns, "running", func(a map[string]string) { a[v1alpha1.WorkerAnnotation] = "worker-2" }); err != nil {
		t.Fatal(err)
	}
	event := waitEvent(ctx, t, d.manager, ns, "running", policy.ReasonUntrustedState, 30*time.Second,
		"annotations jobferry.dev/worker", "was not written by jobferry's manager", "does not act on it")
	t.Logf("moved by its tenant: %s: %s", event.Reason, event.Message)
	if uid := mirrorUID(ctx, t, d.workers["worker-2"], ns, "running"); uid != "" {
		t.Errorf("a mirror was created on worker-2, where the tenant moved the Job: it runs twice")
	}
	if uid := mirrorUID(ctx, t, d.workers["worker-1"], ns, "running"); uid != mirror {
		t.Errorf("the mirror on worker-1 is %q, want %s untouched", uid, mirror)
	}
	// What jobferry wrote, restored: the Job goes on and completes.
	if err := updateAnnotations(ctx, alice, ns, "running", func(a map[string]string) { a[v1alpha1.WorkerAnnotation] = "worker-1" }); err != nil {
		t.Fatal(err)
	}
	done := pollJob(ctx, t, d.manager, ns, "running", time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	if done.Annotations[v1alpha1.DispatchAttemptAnnotation] != "1" || done.Annotations[v1alpha1.MirrorUIDAnnotation] != string(mirror) {
		t.Errorf("completed as attempt %s with mirror %s; want attempt 1 with %s", done.Annotations[v1alpha1.DispatchAttemptAnnotation],
			done.Annotations[v1alpha1.MirrorUIDAnnotation], mirror)
	}

	// A placement written at creation, on a worker the Job's selector rules
	// out: never acted on.
	forged = pinned("forged", "worker-1", time.Second)
	forged.Annotations[v1alpha1.WorkerAnnotation] = "worker-2"
	forged.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	event = waitEvent(ctx, t, d.manager, ns, "forged", policy.ReasonUntrustedState, 30*time.Second, "jobferry.dev/worker", "jobferry.dev/dispatch-attempt")
	t.Logf("placed by its tenant: %s: %s", event.Reason, event.Message)
	for name, w := range d.workers {
		if uid := mirrorUID(ctx, t, w, ns, "forged"); uid != "" {
			t.Errorf("the Job its tenant placed has a mirror on %s", name)
		}
	}

	// Raising the attempt of a running Job: its mirror is not fenced.
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, pinned("rerun", "worker-2", 20*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, "rerun", time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	mirror = mirrorUID(ctx, t, d.workers["worker-2"], ns, "rerun")
	if err := updateAnnotations(ctx, alice, ns, "rerun", func(a map[string]string) { a[v1alpha1.DispatchAttemptAnnotation] = "2" }); err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, d.manager, ns, "rerun", policy.ReasonUntrustedState, 30*time.Second, "jobferry.dev/dispatch-attempt")
	if uid := mirrorUID(ctx, t, d.workers["worker-2"], ns, "rerun"); uid != mirror {
		t.Errorf("the running mirror was replaced (%q, was %s): the Job ran again", uid, mirror)
	}

	// Removing all of jobferry's state from a running Job: it is not placed
	// again, since its mirror runs.
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, pinned("stripped", "worker-1", time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, "stripped", time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	if err := updateAnnotations(ctx, alice, ns, "stripped", func(a map[string]string) {
		for k := range a {
			if strings.HasPrefix(k, "jobferry.dev/") && k != v1alpha1.ClusterSelectorAnnotation {
				delete(a, k)
			}
		}
		// And the selector, so that worker-2 would do.
		delete(a, v1alpha1.ClusterSelectorAnnotation)
	}); err != nil {
		t.Fatal(err)
	}
	event = waitEvent(ctx, t, d.manager, ns, "stripped", policy.ReasonStrayMirror, 30*time.Second, "exists on worker-1", "records attempt 0")
	t.Logf("stripped by its tenant: %s: %s", event.Reason, event.Message)
	if uid := mirrorUID(ctx, t, d.workers["worker-2"], ns, "stripped"); uid != "" {
		t.Errorf("the Job stripped of its state was dispatched again to worker-2: it runs twice")
	}
	for _, name := range []string{"forged", "rerun", "stripped", "running", "policy-probe"} {
		_ = d.manager.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}
}

// A user who may edit Jobs and create Events in a worker namespace (the
// tenant's namespace there, or another) cannot mislead the manager: a
// Warning forged in another namespace, or naming the mirror's pod without
// its UID, reaches no manager Job, a Job put in the mirror's place is not
// taken for it, a mirror deleted there is an Event and a new attempt, and a
// namespace deleted there is created again.
func TestWorkerNamespaceUserCannotMisleadTheManager(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	worker1 := d.workers["worker-1"]
	pinned := func(name string, runFor time.Duration) *batchv1.Job {
		j := sleepJob(ns, name, runFor)
		j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
		return j
	}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, pinned("warned", time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warned := pollJob(ctx, t, d.manager, ns, "warned", time.Minute, "running on worker-1", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	// bob may edit Jobs and create Events in the tenant's namespace on
	// worker-1 (which jobferry created), and create Events in default.
	events := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}
	newEvents := rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}}
	bindRole(ctx, t, worker1, ns, workerUser, "worker-editor", jobEditor, events)
	bindRole(ctx, t, worker1, "default", workerUser, "event-writer-"+ns, events, newEvents)
	bob := impersonate(t, d.Workers[0].RESTConfig(), workerUser)
	pods := jobPods(ctx, t, worker1, ns, "warned")
	if len(pods) != 1 {
		t.Fatalf("%d pods of the mirror, want 1", len(pods))
	}
	pod, podUID := pods[0].Name, pods[0].UID
	warning := func(inNamespace, aboutNamespace string, uid types.UID, reason, message string) {
		t.Helper()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: inNamespace, GenerateName: "forged-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: aboutNamespace, Name: pod, UID: uid},
			Type:           corev1.EventTypeWarning, Reason: reason, Message: message,
		}
		if _, err := bob.CoreV1().Events(inNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Forged where bob has rights: core/v1 lets an Event in default name
	// no namespace; events.k8s.io/v1 may let it name another.
	warning("default", "", podUID, "ForgedNoNamespace", "from default, naming no namespace")
	elsewhere := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "forged-"}, EventTime: metav1.NowMicro(),
		ReportingController: "example.com/forger", ReportingInstance: "forger-1", Action: "Forge",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, UID: podUID},
		Type:      corev1.EventTypeWarning, Reason: "ForgedElsewhere", Note: "from default, naming the tenant's namespace",
	}
	if _, err := bob.EventsV1().Events("default").Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Logf("the worker's API server itself refuses an Event in default about a pod of %s: %v", ns, err)
	}
	// In the namespace itself, naming the pod without its UID or with
	// another: the manager reads the pod and finds it is not that Event's.
	warning(ns, ns, "", "ForgedNoUID", "naming the mirror's pod, without its UID")
	warning(ns, ns, "not-the-pods-uid", "ForgedUID", "naming the mirror's pod, with another UID")
	// Then one about the pod itself (its UID, which bob may not read here
	// but the kubelet and the scheduler write), which the manager forwards:
	// once it is on the Job, the ones before it were seen and judged.
	warning(ns, ns, podUID, "FromTheNamespace", "in the tenant's own worker namespace")
	waitEvent(ctx, t, d.manager, ns, "warned", "FromTheNamespace", 30*time.Second, "worker worker-1, pod "+ns+"/"+pod)
	managerEvents, err := d.manager.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range managerEvents.Items {
		switch e.Reason {
		case "ForgedElsewhere", "ForgedNoNamespace":
			t.Errorf("a Warning forged in another worker namespace was recorded on %s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		case "ForgedNoUID", "ForgedUID":
			t.Errorf("a Warning naming the mirror's pod without its UID was recorded on %s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}
	}

	// bob puts his own Job in the mirror's place, with its labels, one that
	// succeeds at once.
	m, err := worker1.BatchV1().Jobs(ns).Get(ctx, "warned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.BatchV1().Jobs(ns).Delete(ctx, "warned", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	impostor := sleepJob(ns, "warned", 0)
	impostor.Labels = map[string]string{}
	for k, v := range m.Labels {
		if strings.HasPrefix(k, "jobferry.dev/") {
			impostor.Labels[k] = v
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		created, err := bob.BatchV1().Jobs(ns).Create(ctx, impostor, metav1.CreateOptions{})
		if err == nil {
			impostor = created
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("bob could not create his Job in the mirror's place: %v", err)
	}
	// Seen as deleted or as replaced, depending on which the manager saw
	// first; either way it is never taken for the mirror.
	redispatched := pollJob(ctx, t, d.manager, ns, "warned", time.Minute, "dispatched again", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.DispatchAttemptAnnotation] == "2" && j.Annotations[v1alpha1.MirrorUIDAnnotation] != ""
	})
	if redispatched.Annotations[v1alpha1.MirrorUIDAnnotation] == string(impostor.UID) || hasCondition(redispatched, batchv1.JobComplete) != nil {
		t.Errorf("bob's Job was taken for the mirror: %v", redispatched.Annotations)
	}
	reasons := eventReasons(ctx, t, d.manager, ns, "warned")
	if !strings.Contains(reasons, policy.ReasonMirrorNotOurs) && !strings.Contains(reasons, policy.ReasonMirrorDeleted) {
		t.Errorf("Events %s say nothing of the mirror's replacement", reasons)
	}
	t.Logf("the mirror replaced on the worker: %s; dispatched again to %s, mirror %s (bob's %s)", reasons,
		redispatched.Annotations[v1alpha1.WorkerAnnotation], redispatched.Annotations[v1alpha1.MirrorUIDAnnotation], impostor.UID)
	if warned.UID != redispatched.UID {
		t.Fatal("the manager Job was replaced")
	}

	// A mirror deleted on the worker: an Event and a new attempt, which
	// runs to the end.
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, pinned("deleted", 5*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, "deleted", time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	if err := bob.BatchV1().Jobs(ns).Delete(ctx, "deleted", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	event := waitEvent(ctx, t, d.manager, ns, "deleted", policy.ReasonMirrorDeleted, 30*time.Second, "was deleted there, not by jobferry", "attempt 2")
	t.Logf("%s: %s", event.Reason, event.Message)
	done := pollJob(ctx, t, d.manager, ns, "deleted", 2*time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	if done.Annotations[v1alpha1.DispatchAttemptAnnotation] != "2" {
		t.Errorf("completed as attempt %s, want 2", done.Annotations[v1alpha1.DispatchAttemptAnnotation])
	}

	// The whole namespace deleted on the worker (by its administrator),
	// while the Job runs (a Job that finished meanwhile is done, and not run
	// again): jobferry creates it again within seconds, and the Job runs
	// there.
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, pinned("gone", 2*time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, "gone", time.Minute, "running", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	deletedAt := time.Now()
	if err := worker1.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	event = waitEvent(ctx, t, d.manager, ns, "gone", policy.ReasonMirrorDeleted, time.Minute, "was deleted there")
	t.Logf("%s: %s", event.Reason, event.Message)
	again := pollJob(ctx, t, d.manager, ns, "gone", time.Minute, "running again", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.DispatchAttemptAnnotation] == "2" && j.Annotations[v1alpha1.MirrorUIDAnnotation] != "" && j.Status.Active == 1
	})
	t.Logf("the namespace deleted on worker-1: the Job runs there again as attempt 2 on %s, %s after the deletion",
		again.Annotations[v1alpha1.WorkerAnnotation], time.Since(deletedAt).Round(100*time.Millisecond))
	if recreated, err := worker1.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || recreated.CreationTimestamp.Time.Before(deletedAt.Add(-time.Second)) {
		t.Errorf("namespace %s on worker-1 was not created again: %v", ns, err)
	}
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, "gone", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
}

// eventReasons lists the reasons of a manager Job's Events.
func eventReasons(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, job string) string {
	t.Helper()
	events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	return strings.Join(reasons, ",")
}

// A dispatched Job whose tenant suspends it and then changes its pod
// template to one its namespace's Pod Security level forbids: the change is
// not carried to the mirror, and the Job says why.
func TestTemplateChangesHoldToPodSecurity(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	const ns = "team-baseline"
	managerNamespace(ctx, t, d, ns, map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, psaEnforce: "baseline"})
	bindRole(ctx, t, d.manager, ns, tenantUser, "job-editor", jobEditor)
	alice := impersonate(t, d.Manager.RESTConfig(), tenantUser, "team-a")
	job := sleepJob(ns, "suspended", 2*time.Minute)
	job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
	if _, err := alice.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	patch := func(p string) {
		t.Helper()
		if _, err := alice.BatchV1().Jobs(ns).Patch(ctx, job.Name, types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"suspend":true}}`)
	// The template may change once the mirror's pods are gone.
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "suspended", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Status == corev1.ConditionTrue && j.Status.Active == 0
	})
	const apparmor = "container.apparmor.security.beta.kubernetes.io/main"
	patch(`{"spec":{"template":{"metadata":{"annotations":{"` + apparmor + `":"unconfined"}}}}}`)
	event := waitEvent(ctx, t, d.manager, ns, job.Name, policy.ReasonInvalidMirror, 30*time.Second,
		"the changed pod template is not carried to the mirror on worker-1", "rule: Pod Security", `violates PodSecurity "baseline:latest"`, "AppArmor")
	t.Logf("%s: %s", event.Reason, event.Message)
	m, err := d.workers["worker-1"].BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Spec.Template.Annotations[apparmor]; ok {
		t.Errorf("the mirror's template carries %s=%s", apparmor, v)
	}
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
}

// A seal replayed across a worker's loss and return (issue 45): the Job runs
// on one worker as attempt 1; that worker is lost and the Job runs on the
// other as attempt 2; whoever can bypass the state policy (here, acting as
// the manager's own identity) writes the attempt-1 state back, seal and
// all, asking to wait for its worker. The seal verifies, but the sealed
// attempt-2 mirror says the state is not the latest: the Job is not acted
// on (StrayMirror), and when the lost worker returns its attempt-1 mirror
// is deleted rather than kept beside the attempt-2 one: the Job never runs
// twice.
func TestReplayedSealAcrossWorkerLossRunsNothingTwice(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "replayed", 10*time.Minute)
	first, firstClient := dispatchOne(ctx, t, d, job)
	running := pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "running", func(j *batchv1.Job) bool { return j.Status.Active == 1 })
	saved := running.Annotations
	oldMirror := mirrorUID(ctx, t, firstClient, ns, job.Name)

	var lost *localcluster.Cluster
	for _, w := range d.Workers {
		if w.Name == first {
			lost = w
		}
	}
	restart := stopComponent(t, lost, "kube-apiserver")
	again := pollJob(ctx, t, d.manager, ns, job.Name, 2*time.Minute, "running as attempt 2 elsewhere", func(j *batchv1.Job) bool {
		return j.Annotations[v1alpha1.DispatchAttemptAnnotation] == "2" && j.Annotations[v1alpha1.WorkerAnnotation] != first && j.Status.Active == 1
	})
	second := again.Annotations[v1alpha1.WorkerAnnotation]
	// The Job may still show attempt 1's pod as active: its attempt-2
	// mirror is read once it exists.
	var laterMirror types.UID
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		laterMirror = mirrorUID(ctx, t, d.workers[second], ns, job.Name)
		return laterMirror != "", nil
	}); err != nil {
		t.Fatalf("no attempt-2 mirror on %s: %v", second, err)
	}

	replayer := impersonate(t, d.Manager.RESTConfig(), devenv.ManagerUser, "system:masters")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return updateAnnotations(ctx, replayer, ns, job.Name, func(a map[string]string) {
			for k := range a {
				delete(a, k)
			}
			for k, v := range saved {
				a[k] = v
			}
			a[v1alpha1.OnWorkerLostAnnotation] = v1alpha1.OnWorkerLostWait
		})
	}); err != nil {
		t.Fatalf("writing the attempt-1 state back: %v", err)
	}
	e := waitEvent(ctx, t, d.manager, ns, job.Name, policy.ReasonStrayMirror, time.Minute, "exists on "+second, "records attempt 1")
	t.Logf("%s: %s", e.Reason, e.Message)

	restart()
	waitConnected(ctx, t, d, first, metav1.ConditionTrue)
	e = waitEvent(ctx, t, d.manager, ns, job.Name, policy.ReasonStrayMirror, 2*time.Minute,
		"its mirror of attempt 1 on "+first+" was deleted: a mirror of a later attempt (2, on "+second+") exists")
	t.Logf("%s: %s", e.Reason, e.Message)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return mirrorUID(ctx, t, firstClient, ns, job.Name) != oldMirror, nil
	})
	if err != nil {
		t.Errorf("the attempt-1 mirror %s on %s still runs beside attempt 2", oldMirror, first)
	}
	if uid := mirrorUID(ctx, t, d.workers[second], ns, job.Name); uid != laterMirror {
		t.Errorf("the attempt-2 mirror on %s is %q, want %s untouched", second, uid, laterMirror)
	}
	if err := d.manager.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
}
