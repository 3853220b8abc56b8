//go:build integration

package workers

import (
	"context"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/e2e/testenv"
)

// lossyProxy forwards TCP connections to an API server until lose, which
// closes its listener and every connection through it: to a client, the
// server is gone (reset, then refused), as when its machine dies.
type lossyProxy struct {
	listener net.Listener
	mu       sync.Mutex
	conns    []net.Conn
}

func startLossyProxy(t *testing.T, target string) *lossyProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{listener: l}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return // lost
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(p.lose)
	return p
}

func (p *lossyProxy) lose() {
	p.listener.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// On a real API server: when it is lost, the connection's own requests
// (the caches' watches, which break at once) ask for a probe without
// waiting for the health interval, and the probe finds the worker not
// connected.
func TestIntegrationDeadWorkerAsksForProbe(t *testing.T) {
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "api", "v1alpha1", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg := testenv.Start(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	server, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startLossyProxy(t, server.Host)
	through := rest.CopyConfig(cfg)
	through.Host = "https://" + proxy.listener.Addr().String()
	asks := make(chan string, 10)
	conn, err := newConnection("worker-1", through, nil, "hash", "here", "", nil, v1alpha1.NewScheme(), clocktesting.NewFakeClock(time.Now()), connHandlers{
		mirrorChanged: func(string, *batchv1.Job, bool) {}, capacityChanged: func(string) {}, synced: func(string) {}, cacheFailed: func(string) {},
		unanswered: func(w string) { asks <- w },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.stop)
	if err := conn.probe(ctx); err != nil {
		t.Fatalf("probing the running API server: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return conn.Connected(), nil
	}); err != nil {
		t.Fatalf("the connection never became connected: %v", err)
	}
	if n := len(asks); n != 0 {
		t.Fatalf("%d probes asked for while the API server answers", n)
	}

	proxy.lose()
	select {
	case w := <-asks:
		if w != "worker-1" {
			t.Fatalf("a probe of %q asked for", w)
		}
	case <-ctx.Done():
		t.Fatal("no probe asked for after the API server was lost")
	}
	if err := conn.probe(ctx); err == nil {
		t.Fatal("the probe of the lost API server succeeded")
	}
	if conn.Connected() {
		t.Error("still connected after the failed probe")
	}
}
