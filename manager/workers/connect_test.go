package workers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// connectFixture is a Pool whose manager cluster is a fake and whose
// connections are built by the fixture (the seam Pool.build): each has no
// caches, is synced as the fixture says, and probes a loopback server that
// answers /readyz with readyz.
type connectFixture struct {
	pool   *Pool
	client client.Client
	wc     *v1alpha1.WorkerCluster
	server *httptest.Server
	readyz atomic.Int32
	// synced is what a connection built next says of its caches; buildErr,
	// when set, is how building it fails.
	synced   bool
	buildErr error
	builds   int
}

const connectWorkerServer = "https://w1.example"

func newConnectFixture(t *testing.T) *connectFixture {
	t.Helper()
	f := &connectFixture{synced: true}
	f.readyz.Store(http.StatusOK)
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(int(f.readyz.Load()))
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"33","gitVersion":"v1.33.1"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.server.Close)
	f.wc = &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: v1alpha1.WorkerClusterSpec{
		KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1-kubeconfig"}}}}
	f.client = fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build()
	f.pool = NewPool(&Pool{Client: f.client, Namespace: "jobferry-system", Clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), Recorder: events.NewFakeRecorder(10)})
	f.pool.build = f.build
	t.Cleanup(func() { f.pool.Drop("w1") })
	return f
}

// build is the fixture's connectionBuilder.
func (f *connectFixture) build(name string, cfg *rest.Config, token *swappableToken, hash, _, _ string, namespaces []string, _ *runtime.Scheme, clk clock.Clock, _ connHandlers) (*Connection, error) {
	f.builds++
	if f.buildErr != nil {
		return nil, f.buildErr
	}
	health, err := kubernetes.NewForConfig(&rest.Config{Host: f.server.URL})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Connection{name: name, config: cfg, token: token, health: health, kubeconfigHash: hash, namespaces: namespaces, clock: clk, ctx: ctx, cancel: cancel}
	c.lastErr.Store("")
	c.synced.Store(f.synced)
	return c, nil
}

// setSecret writes the worker's kubeconfig Secret with data under key
// (nil data: no Secret).
func (f *connectFixture) setSecret(t *testing.T, key string, data []byte) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "jobferry-system", Name: "w1-kubeconfig"}}
	if err := f.client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if data == nil {
		return
	}
	secret.Data = map[string][]byte{key: data}
	if err := f.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
}

func workerToken(t *testing.T, issued time.Time) string {
	return fakeJWT(t, saClaims("jobferry-system", "jobferry-manager", issued, issued.Add(time.Hour)))
}

// Every outcome of one Connect: the Connected condition's status and
// reason, whether a connection is kept in the pool, and how many were
// built.
func TestConnectOutcomes(t *testing.T) {
	issued := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name string
		// key and kubeconfig of the Secret (no kubeconfig: no Secret).
		key        string
		kubeconfig func(t *testing.T) []byte
		buildErr   error
		readyz     int
		notSynced  bool
		status     metav1.ConditionStatus
		reason     string
		message    string
		kept       bool
		builds     int
	}{
		{name: "no Secret", status: metav1.ConditionFalse, reason: v1alpha1.ReasonSecretNotFound, message: "Secret jobferry-system/w1-kubeconfig not found"},
		{name: "no kubeconfig key", key: "config", kubeconfig: validKubeconfig(issued), status: metav1.ConditionFalse, reason: v1alpha1.ReasonKubeConfigKeyMissing, message: `has no key "kubeconfig"`},
		{name: "kubeconfig unparsable", kubeconfig: func(*testing.T) []byte { return []byte("{not yaml") }, status: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidKubeConfig, message: "Secret jobferry-system/w1-kubeconfig, key kubeconfig"},
		{name: "kubeconfig over plain http", kubeconfig: func(t *testing.T) []byte { return kubeconfigWithToken(t, "http://w1.example", workerToken(t, issued)) },
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonInsecureKubeConfig, message: "plain http"},
		{name: "credential refused while building", kubeconfig: validKubeconfig(issued), buildErr: apierrors.NewUnauthorized("no"),
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonCredentialRejected, message: "kubectl jobferry join w1", builds: 1},
		{name: "unreachable while building", kubeconfig: validKubeconfig(issued), buildErr: errors.New("dial tcp: connection refused"),
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonUnreachable, message: "connection refused", builds: 1},
		{name: "credential refused by the probe", kubeconfig: validKubeconfig(issued), readyz: http.StatusUnauthorized,
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonCredentialRejected, message: "401 Unauthorized", kept: true, builds: 1},
		{name: "probe fails", kubeconfig: validKubeconfig(issued), readyz: http.StatusServiceUnavailable,
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonUnreachable, message: "(1 failed probes)", kept: true, builds: 1},
		{name: "caches not synced", kubeconfig: validKubeconfig(issued), notSynced: true,
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonConnecting, message: "waiting for its caches", kept: true, builds: 1},
		{name: "connected", kubeconfig: validKubeconfig(issued),
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonConnected, message: "connected to " + connectWorkerServer, kept: true, builds: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newConnectFixture(t)
			if tc.kubeconfig != nil {
				key := tc.key
				if key == "" {
					key = "kubeconfig"
				}
				f.setSecret(t, key, tc.kubeconfig(t))
			}
			f.buildErr, f.synced = tc.buildErr, !tc.notSynced
			if tc.readyz != 0 {
				f.readyz.Store(int32(tc.readyz))
			}
			cond, conn := f.pool.Connect(context.Background(), f.wc)
			if cond.Type != v1alpha1.ConditionConnected || cond.Status != tc.status || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) {
				t.Errorf("condition %s=%s %s %q, want %s %s containing %q", cond.Type, cond.Status, cond.Reason, cond.Message, tc.status, tc.reason, tc.message)
			}
			if kept := f.pool.connection("w1") != nil; kept != tc.kept || (conn != nil) != tc.kept {
				t.Errorf("connection kept %t, returned %t; want %t", kept, conn != nil, tc.kept)
			}
			if f.builds != tc.builds {
				t.Errorf("%d connections built, want %d", f.builds, tc.builds)
			}
		})
	}
}

func validKubeconfig(issued time.Time) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return kubeconfigWithToken(t, connectWorkerServer, workerToken(t, issued)) }
}

// What a second Connect does with the live connection: a renewed token of
// the same ServiceAccount is swapped into it; other namespaces, another
// server or stopped caches build a new one (the old one stopped); a Secret
// gone drops it.
func TestConnectAgain(t *testing.T) {
	issued := time.Unix(1_800_000_000, 0)
	renewed := issued.Add(30 * time.Minute)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *connectFixture, first *Connection)
		reason string
		// rebuilt: a new connection replaced the first; dropped: none is left.
		rebuilt, dropped bool
		token            string
	}{
		{name: "same Secret", change: func(*testing.T, *connectFixture, *Connection) {}, reason: v1alpha1.ReasonConnected},
		{name: "token renewed", change: func(t *testing.T, f *connectFixture, _ *Connection) {
			f.setSecret(t, "kubeconfig", kubeconfigWithToken(t, connectWorkerServer, workerToken(t, renewed)))
		}, reason: v1alpha1.ReasonConnected, token: "renewed"},
		{name: "namespaces changed", change: func(_ *testing.T, f *connectFixture, _ *Connection) {
			f.wc.Spec.Namespaces = []string{"team-a"}
		}, reason: v1alpha1.ReasonConnected, rebuilt: true},
		{name: "another server", change: func(t *testing.T, f *connectFixture, _ *Connection) {
			f.setSecret(t, "kubeconfig", kubeconfigWithToken(t, "https://w1-new.example", workerToken(t, issued)))
		}, reason: v1alpha1.ReasonConnected, rebuilt: true},
		{name: "caches stopped", change: func(_ *testing.T, _ *connectFixture, first *Connection) {
			err := errors.New("informer ended")
			first.cacheFailed.Store(&err)
		}, reason: v1alpha1.ReasonConnected, rebuilt: true},
		{name: "Secret deleted", change: func(t *testing.T, f *connectFixture, _ *Connection) {
			f.setSecret(t, "kubeconfig", nil)
		}, reason: v1alpha1.ReasonSecretNotFound, dropped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newConnectFixture(t)
			f.setSecret(t, "kubeconfig", validKubeconfig(issued)(t))
			ctx := context.Background()
			if cond, _ := f.pool.Connect(ctx, f.wc); cond.Reason != v1alpha1.ReasonConnected {
				t.Fatalf("first Connect: %s %q", cond.Reason, cond.Message)
			}
			first := f.pool.connection("w1")
			tc.change(t, f, first)
			cond, _ := f.pool.Connect(ctx, f.wc)
			if cond.Reason != tc.reason {
				t.Errorf("second Connect: %s %q, want %s", cond.Reason, cond.Message, tc.reason)
			}
			now := f.pool.connection("w1")
			switch {
			case tc.dropped:
				if now != nil {
					t.Error("the connection is kept without its Secret")
				}
			case tc.rebuilt:
				if now == first || f.builds != 2 {
					t.Errorf("not rebuilt: %d connections built, the first kept %t", f.builds, now == first)
				}
			default:
				if now != first || f.builds != 1 {
					t.Errorf("rebuilt: %d connections built, the first kept %t", f.builds, now == first)
				}
			}
			if (tc.dropped || tc.rebuilt) && first.ctx.Err() == nil {
				t.Error("the replaced connection was not stopped")
			}
			if tc.token == "renewed" && first.token.get() != workerToken(t, renewed) {
				t.Error("the renewed token is not in the live connection")
			}
		})
	}
}
