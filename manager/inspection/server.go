package inspection

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/jobferry/jobferry/manager/inspection/workerread"
	"github.com/jobferry/jobferry/manager/jobstate"
)

// podEndGrace is how long a followed log whose pod has ended waits for the
// worker to close the stream itself (a kubelet does once the container's
// last lines are out), and rewatch how long after its watch of the pods
// failed it watches again.
const (
	podEndGrace = 2 * time.Second
	rewatch     = 2 * time.Second
)

// writeTimeout is how long a write of an answer may wait for its caller to
// read; describeFor how long a describe may take to read the worker.
const (
	writeTimeout = 30 * time.Second
	describeFor  = time.Minute
)

// Server serves inspection.jobferry.dev/v1alpha1 on every replica of the
// manager (it is no leader's work), behind the APIService the manager
// chart registers, over TLS with the manager's serving certificate.
type Server struct {
	// Addr is where it listens (host:port).
	Addr string
	// TLS sets the serving certificate (admission.CertSource.TLSConfig).
	TLS func(*tls.Config)
	// Reader reads manager Jobs, WorkerClusters and the workers' kubeconfig
	// Secrets: the manager's cache.
	Reader client.Reader
	// Kube is the manager cluster: the front-proxy configuration and the
	// SubjectAccessReviews.
	Kube kubernetes.Interface
	// Namespace holds the workers' kubeconfig Secrets; Origin is the
	// installation's name on its mirrors.
	Namespace, Origin string
	// Keys is the key that seals jobferry's state (statekey.Keys).
	Keys jobstate.KeySource
	// WorkerQPS and WorkerBurst limit the inspection's requests to each
	// worker, all callers' together.
	WorkerQPS   float32
	WorkerBurst int
	Limits      Limits
	Clock       clock.Clock
	// Explainer says where a Job would go now (placements); nil: this
	// manager does not say.
	Explainer Explainer
	// Leading says whether this replica leads (workers.Pool.Leads): one
	// that does not has no memory of its latest placements.
	Leading func() bool

	// front reads the front proxy's configuration; New sets it.
	front *frontProxy
	// unauthenticating, while set, is why the front proxy's configuration
	// is not read yet: requests are answered 503 with it.
	unauthenticating atomic.Pointer[error]
	// The seams the unit tests replace; New sets them for real.
	authn   authenticator.Request
	access  access
	workers func(ctx context.Context, worker string) (*workerread.Reader, error)
	callers *callers
	// started is closed once the server listens.
	started chan struct{}
}

// New readies the server: the front-proxy authenticator reading its
// ConfigMap, SubjectAccessReviews for access, clients of the workers from
// their Secrets.
func New(s *Server) (*Server, error) {
	front, err := newFrontProxy(s.Kube)
	if err != nil {
		return nil, err
	}
	s.front, s.authn = front, front
	notYet := errors.New("the manager has not read the API server's front-proxy configuration yet")
	s.unauthenticating.Store(&notYet)
	s.access = reviews{client: s.Kube.AuthorizationV1().SubjectAccessReviews()}
	s.workers = newWorkerClients(s.Reader, s.Namespace, s.WorkerQPS, s.WorkerBurst).client
	s.callers = newCallers(s.Limits, s.Clock)
	s.started = make(chan struct{})
	return s, nil
}

// serverLimits bound what one connection may hold of the server: the time
// to send a request's headers and the request, the time an idle
// connection is kept, the size of the headers. A response is not timed:
// a followed log streams for as long as Limits.FollowFor.
type serverLimits struct {
	readHeader, read, idle time.Duration
	maxHeaderBytes         int
}

// defaultServerLimits: the aggregator sends a request at once, with the
// caller's name, groups and extras in headers well under 64 KiB.
var defaultServerLimits = serverLimits{readHeader: 10 * time.Second, read: 30 * time.Second, idle: 90 * time.Second, maxHeaderBytes: 64 << 10}

// frontRetry is how often reading the front-proxy configuration is tried
// again after it failed.
const frontRetry = 10 * time.Second

// What an inspection shows of a Job's pods is what kubectl would show of
// pods in the Job's namespace, so the caller needs there, besides get on
// the Job, the rights the core API would ask: describe shows the pods and
// their Events (kubectl describe pod: get pods, list events), logs the
// pods' logs (kubectl logs: get pods/log).
var (
	describeRights = []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "events"}}
	logRights      = []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "pods", Subresource: "log"}}
)

// flushEvery gathers the lines a log answer writes within it into one
// flush: each flush is a frame through the aggregator and the manager
// cluster's API server, whose CPU dispatch shares, so a log of many lines a
// second (every pod of a Job followed at once) costs frames at this pace,
// not per line. A tenant sees a line at most this much later.
const flushEvery = 50 * time.Millisecond

// writeStatus answers with err as a metav1.Status, as the API server does.
func writeStatus(w http.ResponseWriter, err error) {
	var status metav1.Status
	var tm *tooMany
	switch {
	case errors.As(err, &tm):
		status = apierrors.NewTooManyRequests(tm.message, int(tm.retryAfter.Round(time.Second).Seconds())).ErrStatus
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(tm.retryAfter.Round(time.Second).Seconds()))))
	default:
		if api, ok := err.(apierrors.APIStatus); ok {
			status = api.Status()
		} else {
			status = apierrors.NewInternalError(err).ErrStatus
		}
	}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(status.Code), &status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		// The caller went away: nothing is left to tell it.
		logf.Log.WithName("inspection").V(1).Info("the answer did not reach the caller", "error", err.Error())
	}
}
