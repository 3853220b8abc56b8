//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
)

// A kubeconfig Secret that is garbage, skips TLS verification or runs an
// exec plugin leaves the WorkerCluster Connected=False with the matching
// reason; fixing the Secret reconnects without restarting the manager.
func TestWorkerKubeconfigProblemsAndRecovery(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	good, err := os.ReadFile(d.workerKubeconf["worker-2"])
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(change func(*clientcmdapi.Config)) []byte {
		cfg, err := clientcmd.Load(good)
		if err != nil {
			t.Fatal(err)
		}
		change(cfg)
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cluster := func(cfg *clientcmdapi.Config) *clientcmdapi.Cluster {
		return cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	}
	user := func(cfg *clientcmdapi.Config) *clientcmdapi.AuthInfo {
		return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	}

	// A second WorkerCluster for worker-2's API server, cordoned so nothing is
	// placed through it, with a Secret the test rewrites.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: devenv.SystemNamespace, Name: "flaky-kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("not: [a kubeconfig")}}
	if err := d.managerClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "flaky"}, Spec: v1alpha1.WorkerClusterSpec{
		KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: secret.Name}}, Cordoned: true,
	}}
	if err := d.managerClient.Create(ctx, wc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.managerClient.Delete(context.Background(), wc)
		_ = d.managerClient.Delete(context.Background(), secret)
	})

	steps := []struct {
		name       string
		kubeconfig []byte
		reason     string
	}{
		{"garbage", []byte("not: [a kubeconfig"), v1alpha1.ReasonInvalidKubeConfig},
		{"insecure-skip-tls-verify", mutate(func(c *clientcmdapi.Config) {
			cluster(c).InsecureSkipTLSVerify = true
			cluster(c).CertificateAuthorityData = nil
		}), v1alpha1.ReasonInsecureKubeConfig},
		{"exec plugin", mutate(func(c *clientcmdapi.Config) {
			user(c).Exec = &clientcmdapi.ExecConfig{Command: "/usr/bin/get-token", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}), v1alpha1.ReasonExecPluginNotAllowed},
		{"fixed", good, v1alpha1.ReasonConnected},
	}
	for _, step := range steps {
		secret.Data["kubeconfig"] = step.kubeconfig
		if err := d.managerClient.Update(ctx, secret); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var cond *metav1.Condition
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &v1alpha1.WorkerCluster{}
			if err := d.managerClient.Get(ctx, client.ObjectKeyFromObject(wc), got); err != nil {
				return false, err
			}
			cond = meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionConnected)
			return cond != nil && cond.Reason == step.reason, nil
		})
		if err != nil {
			t.Fatalf("%s: Connected condition %+v, want reason %s: %v", step.name, cond, step.reason, err)
		}
		wantStatus := metav1.ConditionFalse
		if step.reason == v1alpha1.ReasonConnected {
			wantStatus = metav1.ConditionTrue
		}
		if cond.Status != wantStatus || cond.Message == "" {
			t.Errorf("%s: Connected=%s (%q), want %s with a message", step.name, cond.Status, cond.Message, wantStatus)
		}
		t.Logf("%s: Connected=%s %s: %s", step.name, cond.Status, cond.Reason, cond.Message)
	}
}

// The webhooks: a managedBy typo is rejected naming the right value, and a Job
// the user created suspended is held until they resume it.
func TestWebhooks(t *testing.T) {
	d := startDispatchEnv(t)
	ctx := t.Context()
	ns := d.optedInNamespace(ctx, t)

	typo := sleepJob(ns, "typo", time.Second)
	typo.Spec.ManagedBy = ptr.To("jobferry.dev/managr")
	_, err := d.manager.BatchV1().Jobs(ns).Create(ctx, typo, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `use "jobferry.dev/manager"`) {
		t.Errorf("creating a Job with managedBy jobferry.dev/managr: got %v, want a rejection naming jobferry.dev/manager", err)
	}

	held := sleepJob(ns, "held", time.Second)
	held.Spec.Suspend = ptr.To(true)
	created, err := d.manager.BatchV1().Jobs(ns).Create(ctx, held, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(created.Spec.ManagedBy, "") != v1alpha1.ManagerManagedBy || created.Annotations[v1alpha1.HeldForPlacementAnnotation] != "" {
		t.Fatalf("opt-in webhook did not take the Job: managedBy %v, annotations %v", created.Spec.ManagedBy, created.Annotations)
	}
	// Another Job dispatched after it proves the manager has looked at both.
	other := sleepJob(ns, "other", time.Second)
	dispatchOne(ctx, t, d, other)
	got := pollJob(ctx, t, d.manager, ns, held.Name, 5*time.Second, "still there", func(*batchv1.Job) bool { return true })
	if w := got.Annotations[v1alpha1.WorkerAnnotation]; w != "" {
		t.Fatalf("a Job the user created suspended was dispatched to %s", w)
	}
	// A patch: jobferry writes the Job's status (Suspended) meanwhile.
	setManagerSuspend(ctx, t, d, ns, held.Name, false)
	done := pollJob(ctx, t, d.manager, ns, held.Name, time.Minute, "Complete after the user resumed it", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobComplete) != nil
	})
	if done.Annotations[v1alpha1.InjectedDirectivesAnnotation] == "" {
		t.Errorf("resumed Job's template was immutable, but no %s annotation records what went into the mirror", v1alpha1.InjectedDirectivesAnnotation)
	}
	d.assertNoRejectedStatusWrites(t)
}
