package inspection

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
)

// NeedLeaderElection: every replica serves, as the aggregator sends each
// request to any of them.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, answering 503 until it has read the
// front-proxy configuration (loadFront): a cluster whose API server cannot
// authenticate to extension API servers leaves the inspection API
// unavailable, and says why, but dispatch and the webhooks go on.
func (s *Server) Start(ctx context.Context) error {
	go s.loadFront(ctx)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	s.TLS(cfg)
	listener, err := tls.Listen("tcp", s.Addr, cfg)
	if err != nil {
		return fmt.Errorf("the inspection API's listener on %s: %w", s.Addr, err)
	}
	server := s.httpServer(ctx, defaultServerLimits)
	close(s.started)
	logf.FromContext(ctx).Info("serving the inspection API", "address", listener.Addr().String(), "group", inspectionv1alpha1.GroupVersion.String())
	errs := make(chan error, 1)
	go func() { errs <- server.Serve(listener) }()
	select {
	case err := <-errs:
		return fmt.Errorf("serving the inspection API: %w", err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return server.Shutdown(shutdown)
	}
}

// httpServer is the server of Handler within limits.
func (s *Server) httpServer(ctx context.Context, limits serverLimits) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: limits.readHeader, ReadTimeout: limits.read,
		IdleTimeout: limits.idle, MaxHeaderBytes: limits.maxHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// loadFront reads the front-proxy configuration until it can, then follows
// it.
func (s *Server) loadFront(ctx context.Context) {
	for {
		err := s.front.load(ctx)
		if err == nil {
			s.unauthenticating.Store(nil)
			s.front.run(ctx)
			return
		}
		if ctx.Err() != nil {
			// Stopping: the read was cut short, nothing failed.
			return
		}
		s.unauthenticating.Store(&err)
		logf.FromContext(ctx).Error(err, "the inspection API cannot authenticate its callers yet; trying again", "in", frontRetry)
		select {
		case <-ctx.Done():
			return
		case <-s.Clock.After(frontRetry):
		}
	}
}

// Started is a readiness check: nil once the server listens.
func (s *Server) Started(*http.Request) error {
	select {
	case <-s.started:
		return nil
	default:
		return errors.New("the inspection API does not listen yet")
	}
}
