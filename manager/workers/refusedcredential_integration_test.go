//go:build integration

package workers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// On a real API server: a worker whose server refuses the kubeconfig's
// token (a bad token written into the Secret, a failed rotation) while the
// connection is first built — discovery is its first request — is
// CredentialRejected, not Unreachable: it answers, its mirrors may run, so
// the worker-lost timeout must not start (issue 45, item 5).
func TestIntegrationRefusedCredentialWhileConnecting(t *testing.T) {
	cfg, scheme, api := startWorkerAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	kc := clientcmdapi.NewConfig()
	kc.Clusters["w"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "not-a-token-this-server-issued"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobferry-system"}}
	if err := api.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "worker-1-kubeconfig"}, Data: map[string][]byte{"kubeconfig": data}}
	if err := api.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	pool := NewPool(&Pool{Client: api, Scheme: scheme, Namespace: ns.Name, Origin: "here", ManagerID: "m1", QPS: 50, Burst: 100,
		Clock: clocktesting.NewFakeClock(time.Now())})
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
		Spec: v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: secret.Name}}}}
	cond, conn := pool.Connect(ctx, wc)
	t.Cleanup(func() { pool.Drop(wc.Name) })
	if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonCredentialRejected {
		t.Fatalf("Connected=%s/%s (%s), want False/%s", cond.Status, cond.Reason, cond.Message, v1alpha1.ReasonCredentialRejected)
	}
	for _, want := range []string{"401 Unauthorized", "Secret jobferry-system/worker-1-kubeconfig", "kubectl jobferry join worker-1"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q lacks %q", cond.Message, want)
		}
	}
	if conn != nil {
		t.Error("a connection was kept though its credential is refused")
	}
}
