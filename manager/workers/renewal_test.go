package workers

import (
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// renewalFixture is a Pool whose manager cluster and worker are fakes:
// the Secret holds a 10-minute token of ns/sa issued at iat, the worker
// answers TokenRequest with issue (or fails with issueErr).
type renewalFixture struct {
	pool     *Pool
	conn     *Connection
	recorder *events.FakeRecorder
	wc       *v1alpha1.WorkerCluster
	worker   *kubefake.Clientset
	requests []*authenticationv1.TokenRequest
}

func newRenewalFixture(t *testing.T, iat, now time.Time, issueErr error) *renewalFixture {
	t.Helper()
	token := fakeJWT(t, saClaims("jobferry-system", "jobferry-manager", iat, iat.Add(10*time.Minute)))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "jobferry-system", Name: "w-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfigWithToken(t, "https://w", token)},
	}
	f := &renewalFixture{
		wc:       &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w-kubeconfig"}}}},
		recorder: events.NewFakeRecorder(10),
		worker:   kubefake.NewClientset(),
	}
	f.worker.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateActionImpl)
		if create.GetSubresource() != "token" {
			return false, nil, nil
		}
		request := create.GetObject().(*authenticationv1.TokenRequest)
		f.requests = append(f.requests, request)
		if issueErr != nil {
			return true, nil, issueErr
		}
		lifetime := time.Duration(*request.Spec.ExpirationSeconds) * time.Second
		issued := request.DeepCopy()
		issued.Status.Token = fakeJWT(t, saClaims("jobferry-system", "jobferry-manager", now, now.Add(lifetime)))
		return true, issued, nil
	})
	f.pool = NewPool(&Pool{
		Client:    fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(secret).Build(),
		Namespace: "jobferry-system", Clock: clocktesting.NewFakeClock(now), Recorder: f.recorder, RenewalThreshold: 0.5,
	})
	f.conn = &Connection{name: "w", token: &swappableToken{}, health: f.worker}
	f.conn.token.set(token)
	f.conn.healthy.Store(true)
	return f
}

func (f *renewalFixture) secretToken(t *testing.T) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := f.pool.Client.Get(t.Context(), client.ObjectKey{Namespace: "jobferry-system", Name: "w-kubeconfig"}, secret); err != nil {
		t.Fatal(err)
	}
	token, err := kubeconfigToken(secret.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestKeepCredentialNotDue(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	f := newRenewalFixture(t, iat, iat.Add(time.Minute), nil)
	before := f.conn.token.get()
	status, cond, after := f.pool.KeepCredential(t.Context(), f.wc, f.conn)
	if len(f.requests) != 0 || f.conn.token.get() != before {
		t.Fatalf("a token at 10%% of its lifetime was renewed (threshold 50%%)")
	}
	if cond.Reason != v1alpha1.ReasonCredentialValid || status.RenewAt == nil || !status.RenewAt.Time.Equal(iat.Add(5*time.Minute)) {
		t.Errorf("condition %s, status %+v", cond.Reason, status)
	}
	if want := 4*time.Minute + 100*time.Millisecond; after != want {
		t.Errorf("looks again after %s, want %s (the renewal time)", after, want)
	}
}

func TestKeepCredentialRenews(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	now := iat.Add(6 * time.Minute)
	f := newRenewalFixture(t, iat, now, nil)
	old := f.conn.token.get()
	status, cond, after := f.pool.KeepCredential(t.Context(), f.wc, f.conn)
	if len(f.requests) != 1 {
		t.Fatalf("%d TokenRequests, want 1", len(f.requests))
	}
	if got := *f.requests[0].Spec.ExpirationSeconds; got != 600 || len(f.requests[0].Spec.Audiences) != 1 {
		t.Errorf("asked for %d s and audiences %q, want the old token's 600 s and audience", got, f.requests[0].Spec.Audiences)
	}
	renewed := f.conn.token.get()
	if renewed == old || f.secretToken(t) != renewed {
		t.Fatal("the renewed token is not both in the Secret and in the live connection")
	}
	if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonCredentialValid {
		t.Errorf("condition %+v", cond)
	}
	if !status.ExpiresAt.Time.Equal(now.Add(10*time.Minute)) || !status.RenewAt.Time.Equal(now.Add(5*time.Minute)) || status.ServiceAccount != "jobferry-system/jobferry-manager" {
		t.Errorf("status %+v", status)
	}
	if after != 5*time.Minute+100*time.Millisecond {
		t.Errorf("looks again after %s", after)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, "Normal "+ReasonCredentialRenewed) {
		t.Errorf("event %q", e)
	}
}

func TestKeepCredentialRenewalFails(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	f := newRenewalFixture(t, iat, iat.Add(6*time.Minute), errors.New(`serviceaccounts "jobferry-manager" is forbidden`))
	old := f.conn.token.get()
	_, cond, after := f.pool.KeepCredential(t.Context(), f.wc, f.conn)
	if f.conn.token.get() != old || f.secretToken(t) != old {
		t.Fatal("a failed renewal changed the token")
	}
	if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonCredentialExpiring || !strings.Contains(cond.Message, "forbidden") {
		t.Errorf("condition %+v", cond)
	}
	if after != renewalRetry {
		t.Errorf("retries after %s, want %s", after, renewalRetry)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, "Warning "+ReasonCredentialRenewalFailed) || !strings.Contains(e, "forbidden") {
		t.Errorf("event %q", e)
	}
}

// A Secret rewritten (by `join`, say) between the connection's read and the
// renewal keeps what was written: the renewal gives up and the next
// reconcile takes the new token.
func TestKeepCredentialLeavesASecretSomeoneRewrote(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	f := newRenewalFixture(t, iat, iat.Add(6*time.Minute), nil)
	f.conn.token.set(fakeJWT(t, saClaims("jobferry-system", "jobferry-manager", iat.Add(-time.Minute), iat.Add(9*time.Minute))))
	secretBefore := f.secretToken(t)
	_, cond, _ := f.pool.KeepCredential(t.Context(), f.wc, f.conn)
	if f.secretToken(t) != secretBefore {
		t.Error("the renewal overwrote a Secret written since the connection read it")
	}
	if cond.Reason != v1alpha1.ReasonCredentialExpiring || !strings.Contains(cond.Message, "changed while its token was being renewed") {
		t.Errorf("condition %+v", cond)
	}
}

func TestKeepCredentialWithoutExpiry(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	f := newRenewalFixture(t, iat, iat, nil)
	f.conn.token.set("static-token")
	status, cond, after := f.pool.KeepCredential(t.Context(), f.wc, f.conn)
	if status != nil || cond != nil || after != 0 || len(f.requests) != 0 {
		t.Errorf("a static token: status %+v, condition %+v, after %s, %d requests", status, cond, after, len(f.requests))
	}
}
