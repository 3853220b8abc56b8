//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// limitedWorker registers worker-2's API server once more, as WorkerCluster
// "limited", with the token of a ServiceAccount whose ClusterRole the test
// edits: the manager's credential there has exactly the rights the test
// grants.
type limitedWorker struct {
	name   string
	worker kubernetes.Interface
	role   string
}

func registerLimitedWorker(ctx context.Context, t *testing.T, d *dispatchEnv) *limitedWorker {
	t.Helper()
	const name, saNamespace = "limited", "e2e-limited"
	w := &limitedWorker{name: name, worker: d.workers["worker-2"], role: "e2e-limited-manager"}
	if _, err := w.worker.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: saNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := w.worker.CoreV1().ServiceAccounts(saNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "manager"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.grant(ctx, t, readOnlyRules()...)
	if _, err := w.worker.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: w.role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: w.role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: sa.Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := w.worker.CoreV1().ServiceAccounts(saNamespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := os.ReadFile(d.workerKubeconf["worker-2"])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := cfg.CurrentContext
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"limited": {Token: token.Status.Token}}
	cfg.Contexts[ctxName].AuthInfo = "limited"
	kubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: devenv.SystemNamespace, Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	if err := d.managerClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	wc := &v1alpha1.WorkerCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{workerNameLabel: name}},
		Spec:       v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: secret.Name}}},
	}
	if err := d.managerClient.Create(ctx, wc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = d.managerClient.Delete(ctx, wc)
		_ = d.managerClient.Delete(ctx, secret)
		_ = w.worker.RbacV1().ClusterRoleBindings().Delete(ctx, w.role, metav1.DeleteOptions{})
		_ = w.worker.RbacV1().ClusterRoles().Delete(ctx, w.role, metav1.DeleteOptions{})
		_ = w.worker.CoreV1().Namespaces().Delete(ctx, saNamespace, metav1.DeleteOptions{})
	})
	return w
}

// readOnlyRules let the manager connect (cache mirrors and the capacity
// summary) but not run anything.
func readOnlyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"clustercapacities"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	}
}

func allRules() []rbacv1.PolicyRule {
	return append(readOnlyRules(),
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}})
}

// grant sets the ClusterRole of the credential to exactly rules.
func (w *limitedWorker) grant(ctx context.Context, t *testing.T, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: w.role}, Rules: rules}
	if _, err := w.worker.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := w.worker.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *limitedWorker) authorized(ctx context.Context, t *testing.T, d *dispatchEnv, want metav1.ConditionStatus) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: w.name}, wc); err != nil {
			return false, err
		}
		connected := meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionConnected)
		cond = meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionAuthorized)
		return connected && cond != nil && cond.Status == want, nil
	})
	if err != nil {
		t.Fatalf("WorkerCluster %s never became Connected with Authorized=%s: %v (last %+v)", w.name, want, err, cond)
	}
	return cond
}

// A worker whose credential may not run Jobs there is Connected but not
// Authorized, with a condition naming the missing rights; a Job meant for
// it waits, saying why, in its placement Event and condition, and proceeds
// within seconds once the rights are granted. A right revoked after the last
// check makes the mirror's creation fail as forbidden: the Job gets a Warning
// Event with the API server's message, the worker is found unauthorized at
// once and the Job waits again; granted again, it runs. The counts of the
// worker's status (the DISPATCHED column) follow its Job.
func TestWorkerCredentialWithoutRights(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	limited := registerLimitedWorker(ctx, t, d)
	cond := limited.authorized(ctx, t, d, metav1.ConditionFalse)
	t.Logf("read-only credential: Authorized=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	if cond.Reason != v1alpha1.ReasonMissingRights || !containsAll(cond.Message, "create jobs.batch", "update jobs.batch", "delete jobs.batch") {
		t.Errorf("the Authorized condition does not name the missing rights: %+v", cond)
	}

	ns := d.optedInNamespace(ctx, t)
	job := sleepJob(ns, "needs-rights", 4*time.Second)
	job.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + limited.name}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, d.manager, ns, job.Name, "Unschedulable", 30*time.Second, "limited: its credential may not create jobs.batch")
	waiting := pollJob(ctx, t, d.manager, ns, job.Name, 30*time.Second, "waiting, saying why", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && strings.Contains(c.Message, "its credential may not create jobs.batch")
	})
	if w := waiting.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		t.Errorf("placed on %s while the credential may not create Jobs there", w)
	}

	granted := time.Now()
	limited.grant(ctx, t, allRules()...)
	waitExists(ctx, t, limited.worker, ns, job.Name, 30*time.Second)
	t.Logf("mirror created %s after the rights were granted", time.Since(granted).Round(100*time.Millisecond))
	limited.authorized(ctx, t, d, metav1.ConditionTrue)
	limited.waitCounts(ctx, t, d, 1)
	pollJob(ctx, t, d.manager, ns, job.Name, time.Minute, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) != nil })
	limited.waitCounts(ctx, t, d, 0)

	// Revoked after the last check (the next periodic one is a minute
	// away): the manager learns it from the refused create.
	limited.grant(ctx, t, append(readOnlyRules(), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}})...)
	limited.waitMayCreateJobs(ctx, t, false)
	revoked := sleepJob(ns, "rights-revoked", time.Second)
	revoked.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + limited.name}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, revoked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rejected := waitEvent(ctx, t, d.manager, ns, revoked.Name, "MirrorRejected", 30*time.Second, "forbidden", "cannot create resource \"jobs\"")
	t.Logf("MirrorRejected: %s", rejected.Message)
	waitEvent(ctx, t, d.manager, ns, revoked.Name, policy.ReasonMissingRights, 30*time.Second, "may not create jobs.batch")
	limited.authorized(ctx, t, d, metav1.ConditionFalse)
	pollJob(ctx, t, d.manager, ns, revoked.Name, 30*time.Second, "released and waiting", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return j.Annotations[v1alpha1.WorkerAnnotation] == "" && c != nil && c.Reason == policy.ReasonNoWorkerFits
	})
	limited.grant(ctx, t, allRules()...)
	pollJob(ctx, t, d.manager, ns, revoked.Name, time.Minute, "Complete once granted again", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})

	// Every right revoked (the identity's binding gone, issue 23): a Job
	// meant for the worker does not wait in silence while the manager's
	// reads there are refused; it says why, and runs once granted again.
	limited.grant(ctx, t)
	limited.waitMayCreateJobs(ctx, t, false)
	orphaned := sleepJob(ns, "no-rights-at-all", time.Second)
	orphaned.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=" + limited.name}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, orphaned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	said := pollJob(ctx, t, d.manager, ns, orphaned.Name, 30*time.Second, "waiting, saying the credential may not", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return j.Annotations[v1alpha1.WorkerAnnotation] == "" && c != nil && strings.Contains(c.Message, limited.name+": its credential may not")
	})
	t.Logf("every right revoked: %s", suspendedCondition(said).Message)
	limited.grant(ctx, t, allRules()...)
	pollJob(ctx, t, d.manager, ns, orphaned.Name, time.Minute, "Complete once granted again", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	d.assertNoRejectedStatusWrites(t)
}

// waitMayCreateJobs waits until the worker's authorizer has caught up with
// the ClusterRole: the credential may, or may not, create Jobs.
func (w *limitedWorker) waitMayCreateJobs(ctx context.Context, t *testing.T, want bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		review, err := w.worker.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:e2e-limited:manager",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: "batch", Resource: "jobs"},
		}}, metav1.CreateOptions{})
		return err == nil && review.Status.Allowed == want, err
	})
	if err != nil {
		t.Fatalf("the worker never saw the credential's right to create Jobs become %t: %v", want, err)
	}
}

// waitCounts waits until the worker's status counts want unfinished Jobs.
func (w *limitedWorker) waitCounts(ctx context.Context, t *testing.T, d *dispatchEnv, want int32) {
	t.Helper()
	var got int32 = -1
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		wc := &v1alpha1.WorkerCluster{}
		if err := d.managerClient.Get(ctx, client.ObjectKey{Name: w.name}, wc); err != nil {
			return false, err
		}
		got = wc.Status.DispatchedJobs
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("WorkerCluster %s counts %d dispatched Jobs, want %d: %v", w.name, got, want, err)
	}
}

// Writes the API server refuses reach the Job, and none is retried in a hot
// loop: recording the placement on a Job whose annotations are at the size
// limit is rejected once, with a Warning Event and the reason on the Job's
// condition, while capacity changes keep re-enqueueing it; trimming the
// annotations lets it run. A mirror a worker's own policy refuses gives a
// MirrorRejected Event with the policy's message, and the Job waits saying
// so until its user changes it.
func TestRefusedWritesShowOnTheJob(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)

	big := sleepJob(ns, "big-annotations", time.Second)
	// The webhook's annotation fits; the placement's two do not.
	const limit = 256 * 1024
	used := len(v1alpha1.HeldForPlacementAnnotation) + len("true") + len("payload")
	big.Annotations = map[string]string{"payload": strings.Repeat("x", limit-used-10)}
	before := countWriteRejections(t, d)
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rejected := waitEvent(ctx, t, d.manager, ns, big.Name, "PlacementRejected", 30*time.Second, "Too long")
	t.Logf("PlacementRejected: %s", rejected.Message)
	pollJob(ctx, t, d.manager, ns, big.Name, 10*time.Second, "waiting, saying the placement was refused", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Reason == policy.ReasonWaitingForWorker && strings.Contains(c.Message, "was refused")
	})
	// Other Jobs come and go meanwhile, so capacity summaries change and
	// every unplaced Job is looked at again.
	other := d.optedInNamespace(ctx, t)
	for _, name := range []string{"churn-1", "churn-2", "churn-3"} {
		if _, err := d.manager.BatchV1().Jobs(other).Create(ctx, sleepJob(other, name, time.Second), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitAllComplete(ctx, t, d, other, 3, time.Minute)
	if n := countWriteRejections(t, d) - before; n != 1 {
		t.Errorf("the manager's API server rejected %v writes while one placement was refused, want 1 (no retry until the Job changes)", n)
	}
	mergePatchJob(ctx, t, d.manager, ns, big.Name, `{"metadata":{"annotations":{"payload":null}}}`)
	pollJob(ctx, t, d.manager, ns, big.Name, time.Minute, "Complete once the annotations fit", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})

	// worker-1 refuses Jobs labelled e2e.jobferry.dev/refuse in this
	// namespace; the namespace must exist there for the policy to match
	// (made by jobferry for an earlier Job, or by its administrator, who
	// accepts the manager's Jobs in it).
	worker := d.workers["worker-1"]
	if _, err := worker.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		acceptingNamespace(ctx, t, worker, ns, managerID(ctx, t, d.managerClient, devenv.SystemNamespace), nil)
	} else if err != nil {
		t.Fatal(err)
	}
	const refusal = "e2e: Jobs labelled e2e.jobferry.dev/refuse do not run here"
	refuseOnWorker(ctx, t, worker, ns, []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		"!has(object.metadata.labels) || !('e2e.jobferry.dev/refuse' in object.metadata.labels)", refusal, func(ctx context.Context) error {
			probe := sleepJob(ns, "probe", time.Second)
			probe.Labels = map[string]string{"e2e.jobferry.dev/refuse": "true"}
			_, err := worker.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	refusedJob := sleepJob(ns, "refused-mirror", time.Second)
	refusedJob.Labels = map[string]string{"e2e.jobferry.dev/refuse": "true"}
	refusedJob.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: workerNameLabel + "=worker-1"}
	if _, err := d.manager.BatchV1().Jobs(ns).Create(ctx, refusedJob, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, d.manager, ns, refusedJob.Name, "MirrorRejected", 30*time.Second, refusal)
	pollJob(ctx, t, d.manager, ns, refusedJob.Name, 10*time.Second, "waiting for its mirror, saying why", func(j *batchv1.Job) bool {
		c := suspendedCondition(j)
		return c != nil && c.Reason == policy.ReasonWaitingForMirror && strings.Contains(c.Message, refusal)
	})
	if got := kubectlStatus(ctx, t, d.Manager.KubeconfigPath, ns, refusedJob.Name); got != "Suspended" {
		t.Errorf("kubectl get job shows %s for a Job whose mirror was refused", got)
	}
	mergePatchJob(ctx, t, d.manager, ns, refusedJob.Name, `{"metadata":{"labels":{"e2e.jobferry.dev/refuse":null}}}`)
	pollJob(ctx, t, d.manager, ns, refusedJob.Name, time.Minute, "Complete once the label is gone", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	d.assertNoRejectedStatusWrites(t)
}

// countWriteRejections is how many writes (updates and patches) the
// manager's API server answered with 422 Unprocessable Entity (the
// manager's client-go metrics).
func countWriteRejections(t *testing.T, d *dispatchEnv) float64 {
	t.Helper()
	requests := d.metrics(t)["rest_client_requests_total"]
	host := strings.TrimPrefix(d.Manager.Server, "https://")
	var n float64
	for _, method := range []string{"PUT", "PATCH"} {
		n += metricSum(requests, map[string]string{"code": "422", "method": method, "host": host})
	}
	return n
}
