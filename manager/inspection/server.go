package inspection

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/manager/inspection/workerread"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/metrics"
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

// httpServer is the server of Handler within limits.
func (s *Server) httpServer(ctx context.Context, limits serverLimits) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: limits.readHeader, ReadTimeout: limits.read,
		IdleTimeout: limits.idle, MaxHeaderBytes: limits.maxHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// frontRetry is how often reading the front-proxy configuration is tried
// again after it failed.
const frontRetry = 10 * time.Second

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

// Handler routes the API's paths.
func (s *Server) Handler() http.Handler {
	base := "/apis/" + inspectionv1alpha1.GroupVersion.Group + "/" + inspectionv1alpha1.GroupVersion.Version
	mux := http.NewServeMux()
	jobs, logs := inspectionv1alpha1.JobsResource, inspectionv1alpha1.JobsResource+"/"+inspectionv1alpha1.LogSubresource
	mux.HandleFunc("GET "+base, s.authenticated(s.discovery))
	mux.HandleFunc("GET "+base+"/namespaces/{namespace}/jobs/{name}", counted(jobs, s.authenticated(s.inspect)))
	mux.HandleFunc("GET "+base+"/namespaces/{namespace}/jobs/{name}/log", counted(logs, s.authenticated(s.logs)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	})
	return mux
}

// counted counts the answers of h (jobferry_inspection_requests_total).
func counted(resource string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answer := &answerCode{ResponseWriter: w, code: http.StatusOK}
		h(answer, r)
		metrics.InspectionRequests.WithLabelValues(resource, strconv.Itoa(answer.code)).Inc()
	}
}

// answerCode remembers the status code a handler answered with.
type answerCode struct {
	http.ResponseWriter
	code int
}

func (a *answerCode) WriteHeader(code int) {
	a.code = code
	a.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerCode) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// FlushError lets http.ResponseController's Flush say when the caller has
// gone (it prefers it to Flush).
func (a *answerCode) FlushError() error { return http.NewResponseController(a.ResponseWriter).Flush() }

// Flush lets a log stream through as it comes.
func (a *answerCode) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// authenticated runs h for a caller the front proxy vouches for.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, user.Info)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := s.unauthenticating.Load(); why != nil {
			writeStatus(w, apierrors.NewServiceUnavailable((*why).Error()))
			return
		}
		resp, ok, err := s.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			writeStatus(w, apierrors.NewUnauthorized("the inspection API serves requests the API server's aggregator proxies, with its front-proxy client certificate"))
			return
		}
		h(w, r, resp.User)
	}
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request, _ user.Info) {
	writeJSON(w, http.StatusOK, &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: inspectionv1alpha1.GroupVersion.String(),
		APIResources: []metav1.APIResource{
			{Name: inspectionv1alpha1.JobsResource, Namespaced: true, Kind: inspectionv1alpha1.Kind, Verbs: metav1.Verbs{"get"}},
			{Name: inspectionv1alpha1.JobsResource + "/" + inspectionv1alpha1.LogSubresource, Namespaced: true, Kind: inspectionv1alpha1.Kind, Verbs: metav1.Verbs{"get"}},
		},
	})
}

// What an inspection shows of a Job's pods is what kubectl would show of
// pods in the Job's namespace, so the caller needs there, besides get on
// the Job, the rights the core API would ask: describe shows the pods and
// their Events (kubectl describe pod: get pods, list events), logs the
// pods' logs (kubectl logs: get pods/log).
var (
	describeRights = []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "events"}}
	logRights      = []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "pods", Subresource: "log"}}
)

// request is what every handler establishes first: the caller within its
// rate, allowed to get the manager Job and to have the rights the core
// API would ask for what the handler shows of it (rights, in the Job's
// namespace); then the Job is read.
func (s *Server) request(w http.ResponseWriter, r *http.Request, who user.Info, rights []authorizationv1.ResourceAttributes) (*batchv1.Job, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("namespace %q: %v", ns, errs)))
		return nil, false
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("Job name %q: %v", name, errs)))
		return nil, false
	}
	if err := s.callers.admit(who.GetName()); err != nil {
		writeStatus(w, err)
		return nil, false
	}
	// Whether the caller may get the Job comes first: a Job they may not
	// read is Forbidden whether it exists or not.
	jobs := schema.GroupResource{Group: batchv1.GroupName, Resource: "jobs"}
	allowed, reason, err := s.access.allowed(r.Context(), who, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "get", Group: jobs.Group, Version: "v1", Resource: jobs.Resource, Name: name,
	})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return nil, false
	}
	if !allowed {
		writeStatus(w, apierrors.NewForbidden(jobs, name, errors.New(cannot(who, "get", jobs.Resource, jobs.Group, ns, reason))))
		return nil, false
	}
	for _, right := range rights {
		right.Namespace, right.Version = ns, "v1"
		allowed, reason, err := s.access.allowed(r.Context(), who, right)
		if err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return nil, false
		}
		if !allowed {
			resource := right.Resource
			if right.Subresource != "" {
				resource += "/" + right.Subresource
			}
			msg := cannot(who, right.Verb, resource, "", ns, reason) +
				fmt.Sprintf(" (what an inspection shows of Job %s's pods takes the rights kubectl would need to be shown it: %s)", name, rightsList(rights))
			writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New(msg)))
			return nil, false
		}
	}
	job := &batchv1.Job{}
	if err := s.Reader.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			writeStatus(w, apierrors.NewNotFound(jobs, name))
		} else {
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("reading Job %s/%s: %w", ns, name, err)))
		}
		return nil, false
	}
	return job, true
}

// mirrorSide is the worker side of a manager Job as far as it could be
// read: the worker's client and the mirror, or the note saying why not.
type mirrorSide struct {
	placement placement
	worker    *workerread.Reader
	mirror    *batchv1.Job
	note      string
}

func (s *Server) mirrorSide(ctx context.Context, job *batchv1.Job) (mirrorSide, error) {
	key, err := s.Keys.Key(ctx)
	if err != nil {
		return mirrorSide{}, err
	}
	var m mirrorSide
	if m.placement, m.note = placementOf(job, key); m.note != "" {
		return m, nil
	}
	w := m.placement.worker
	if m.worker, err = s.workers(ctx, w); err != nil {
		if u := (unreachable{}); errors.As(err, &u) {
			m.note = u.Error()
			return m, nil
		}
		return m, err
	}
	mirror, err := m.worker.Mirror(ctx, job.Namespace, job.Name)
	switch {
	case apierrors.IsNotFound(err):
		m.note = noMirrorNote(job, w)
	case err != nil:
		m.note = fmt.Sprintf("reading the mirror on worker %s: %v", w, err)
	default:
		if m.note = notMirror(job, m.placement, mirror, s.Origin); m.note == "" {
			m.mirror = mirror
		}
	}
	return m, nil
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request, who user.Info) {
	job, ok := s.request(w, r, who, describeRights)
	if !ok {
		return
	}
	end, err := s.callers.beginDescribe()
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer end()
	// The worker's reads may wait on the inspections' rate limiter past
	// the server's read deadline, which must not cancel them (a GET has
	// no body); they have describeFor instead.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(r.Context(), describeFor)
	defer cancel()
	out := &inspectionv1alpha1.JobInspection{
		TypeMeta:   metav1.TypeMeta{Kind: inspectionv1alpha1.Kind, APIVersion: inspectionv1alpha1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name, UID: job.UID},
	}
	side, err := s.mirrorSide(ctx, job)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	out.Worker, out.Attempt, out.Notes.Mirror = side.placement.worker, side.placement.attempt, side.note
	if side.mirror == nil {
		writeInspection(w, out)
		return
	}
	out.Mirror = side.mirror
	pods, err := side.worker.Pods(ctx, side.mirror, s.Limits.MaxPods)
	switch {
	case err != nil:
		out.Notes.Pods = readRefused(out.Worker, "list the mirror's pods", err)
	case pods.Stopped:
		out.Notes.Pods = fmt.Sprintf("showing %d of the mirror's pods: %v", len(pods.Items), workerread.ErrReadBudget)
	case pods.More:
		out.Notes.Pods = fmt.Sprintf("showing %d of the mirror's pods: an inspection shows at most %d, found among the first %d pods on the worker labelled as the mirror's",
			len(pods.Items), s.Limits.MaxPods, workerread.MaxScanned(s.Limits.MaxPods))
	}
	out.Pods = pods.Items
	events, all, cut, err := side.worker.Events(ctx, job.Namespace, uidsOf(side.mirror, pods.Items), s.Limits.ScanEvents, s.Limits.MaxEvents)
	switch {
	case err != nil:
		out.Notes.Events = readRefused(out.Worker, "list Events", err)
	case !all:
		out.Notes.Events = fmt.Sprintf("not every Event of the namespace on the worker was read (at most %d, and within %d MiB with the pods)", s.Limits.ScanEvents, workerread.ReadBudget>>20)
	case cut:
		out.Notes.Events = fmt.Sprintf("showing the newest %d Events", s.Limits.MaxEvents)
	}
	out.Events = events
	writeInspection(w, out)
}

// writeInspection answers with out, its pods and Events encoded one at a
// time: the answer is never held whole a second time, encoded.
func writeInspection(w http.ResponseWriter, out *inspectionv1alpha1.JobInspection) {
	pods, events := out.Pods, out.Events
	head := *out
	head.Pods, head.Events = nil, nil
	b, err := json.Marshal(&head)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	// A caller that stops reading loses its answer; the deadline ends
	// with it (a later request on the connection has its own).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// head is a JSON object: its closing brace comes after the lists.
	_, err = w.Write(b[:len(b)-1])
	if err == nil {
		err = writeList(w, "pods", pods)
	}
	if err == nil {
		err = writeList(w, "events", events)
	}
	if err == nil {
		_, err = io.WriteString(w, "}\n")
	}
	if err != nil {
		// The caller went away: nothing is left to tell it.
		logf.Log.WithName("inspection").V(1).Info("the answer did not reach the caller", "error", err.Error())
	}
}

// writeList writes `,"name":[items]`, an item at a time.
func writeList[T any](w io.Writer, name string, items []T) error {
	if _, err := fmt.Fprintf(w, `,%q:[`, name); err != nil {
		return err
	}
	for i := range items {
		item, err := json.Marshal(&items[i])
		if err != nil {
			// Half an answer is sent: end it unfinished.
			panic(http.ErrAbortHandler)
		}
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if _, err := w.Write(item); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]")
	return err
}

// cannot says, in the API server's words, that who may not verb resource.
func cannot(who user.Info, verb, resource, group, ns, reason string) string {
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", who.GetName(), verb, resource, group, ns)
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}

// rightsList names rights as kubectl's auth can-i would: "get pods, list
// events".
func rightsList(rights []authorizationv1.ResourceAttributes) string {
	names := make([]string, len(rights))
	for i, r := range rights {
		names[i] = r.Verb + " " + r.Resource
		if r.Subresource != "" {
			names[i] += "/" + r.Subresource
		}
	}
	return strings.Join(names, ", ")
}

// readRefused explains a read of the worker that failed, naming the worker
// chart value that grants it when the worker refused the manager.
func readRefused(worker, what string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("worker %s does not let the manager's identity %s (install the worker chart with --set managerIdentity.allowInspection=true to grant it): %v", worker, what, err)
	}
	return fmt.Sprintf("%s on worker %s: %v", what, worker, err)
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request, who user.Info) {
	q, err := parseLogQuery(r.URL.Query(), s.Limits.MaxLogBytes)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	job, ok := s.request(w, r, who, logRights)
	if !ok {
		return
	}
	// One stream first (a caller with none left is refused before the
	// worker is read); a followed log of several containers takes more
	// once it knows how many.
	streams, err := s.callers.openStreams(who.GetName())
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer streams.release()
	// A log is streamed for as long as it lasts: the server's read
	// deadline (a GET has no body) must not cut it (net/http cancels the
	// request's context when it passes).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx := r.Context()
	targets, resourceVersion, stopped, side, ok := s.logTargets(ctx, w, job, q)
	if !ok {
		return
	}
	out := &logWriter{w: w, limit: q.limitBytes, remaining: q.limitBytes, managerCap: q.limitBytes == s.Limits.MaxLogBytes}
	// However the handler returns, no flush comes after it.
	defer out.end()
	if stopped {
		out.line(fmt.Sprintf("jobferry: only the pods found within what an inspection reads of the worker's lists are read: %v", workerread.ErrReadBudget))
	}
	prefix := len(targets) > 1 || q.allPods
	if !q.follow {
		// One stream at a time.
		for _, t := range targets {
			if out.full() {
				break
			}
			s.stream(ctx, side, t, q, prefix, out, nil)
		}
		out.finish(w)
		return
	}
	if granted := 1 + streams.grow(len(targets)-1); granted < len(targets) {
		out.line(fmt.Sprintf("jobferry: following %d of the %d containers chosen: %s may have %d log streams open at once, and the manager %d",
			granted, len(targets), who.GetName(), s.Limits.StreamsPerCaller, s.Limits.MaxStreams))
		targets = targets[:granted]
	}
	ctx, cancel := context.WithTimeout(ctx, s.Limits.FollowFor)
	defer cancel()
	ends := newPodEnds(s.Clock, targets)
	var watching sync.WaitGroup
	watching.Go(func() { s.watchEnds(ctx, side, resourceVersion, ends, out) })
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			// Its slot back as it ends: the caller's others go on.
			defer streams.releaseOne()
			s.stream(ctx, side, t, q, prefix, out, ends)
		})
	}
	wg.Wait()
	// The watch writes to the answer too: it ends before the answer does.
	cancel()
	watching.Wait()
	out.finish(w)
}

// logTargets reads the mirror and its pods, and picks the containers whose
// logs a request reads (and the pods' list's version, where a watch of them
// starts), or answers why there are none. The reading counts as one of the
// replica's inspections: the pods are held as shown only until the targets
// are picked.
func (s *Server) logTargets(ctx context.Context, w http.ResponseWriter, job *batchv1.Job, q logQuery) (targets []logTarget, resourceVersion string, stopped bool, side mirrorSide, ok bool) {
	end, err := s.callers.beginDescribe()
	if err != nil {
		writeStatus(w, err)
		return nil, "", false, mirrorSide{}, false
	}
	defer end()
	if side, err = s.mirrorSide(ctx, job); err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return nil, "", false, side, false
	}
	if side.mirror == nil {
		writeStatus(w, noLogs(job, side.note))
		return nil, "", false, side, false
	}
	pods, err := side.worker.Pods(ctx, side.mirror, s.Limits.MaxPods)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(readRefused(side.placement.worker, "list the mirror's pods", err)))
		return nil, "", false, side, false
	}
	if targets, err = logTargets(pods.Items, q); err != nil {
		writeStatus(w, noLogs(job, err.Error()))
		return nil, "", false, side, false
	}
	return targets, pods.ResourceVersion, pods.Stopped, side, true
}

// noLogs: the Job has no logs to read, and why.
func noLogs(job *batchv1.Job, why string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("Job %s/%s has no logs to read: %s", job.Namespace, job.Name, why)}}
}

// stream copies one container's log to out, line by line, each cut to
// MaxLineBytes; a followed log ends when its pod has ended (ends says so,
// and the worker closes the stream), or with ctx.
func (s *Server) stream(ctx context.Context, side mirrorSide, t logTarget, q logQuery, prefix bool, out *logWriter, ends *podEnds) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A pod that has ended writes no more: its log is read, not followed
	// (a kubelet would end the stream at once; not every server does).
	follow := q.follow && !t.ended
	if follow && ends != nil {
		ends.follow(ctx, t.pod, cancel)
	}
	log, err := side.worker.Log(ctx, t.namespace, t.pod, t.container, follow, out.budget())
	if err != nil {
		out.fail(fmt.Errorf("%s", readRefused(side.placement.worker, "read pod logs", err)))
		return
	}
	defer log.Close()
	err = eachLine(log, s.Limits.MaxLineBytes, func(line string) bool {
		if prefix {
			line = fmt.Sprintf("[pod/%s/%s] %s", t.pod, t.container, line)
		}
		return out.line(line)
	})
	if err != nil && ctx.Err() == nil {
		out.fail(fmt.Errorf("reading the log of pod %s, container %s, on worker %s: %w", t.pod, t.container, side.placement.worker, err))
	}
}

// eachLine hands each line of r to line, without its newline, until line
// says stop; a line longer than max bytes is cut there and marked, and
// the rest of it skipped: what one line holds is bounded, whatever the
// container wrote.
func eachLine(r io.Reader, max int, line func(string) bool) error {
	// Room for a line of max bytes and its newline.
	lines := bufio.NewReaderSize(r, max+1)
	skipping := false
	for {
		b, err := lines.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping && !line(string(b[:max])+fmt.Sprintf(" [jobferry: line cut at %d bytes]", max)) {
				return nil
			}
			skipping = true
			continue
		case len(b) > 0 && !skipping:
			// As bufio.ScanLines: without its newline and a carriage return.
			if !line(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")) {
				return nil
			}
		}
		skipping = false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// podEnds cancels each followed stream once its pod has ended or is gone,
// after podEndGrace for the worker to close it first, as one watch of the
// mirror's pods tells (watchEnds).
type podEnds struct {
	clock clock.Clock
	// followed are the pods of the request's streams: no other pod the
	// watch sees is remembered.
	followed map[string]bool
	mu       sync.Mutex
	cancels  map[string][]context.CancelFunc
	ended    map[string]bool
}

func newPodEnds(clk clock.Clock, targets []logTarget) *podEnds {
	e := &podEnds{clock: clk, followed: map[string]bool{}, cancels: map[string][]context.CancelFunc{}, ended: map[string]bool{}}
	for _, t := range targets {
		e.followed[t.pod] = true
	}
	return e
}

// follow has cancel called once pod has ended.
func (e *podEnds) follow(ctx context.Context, pod string, cancel context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended[pod] {
		go e.cancelAfterGrace(ctx, []context.CancelFunc{cancel})
		return
	}
	e.cancels[pod] = append(e.cancels[pod], cancel)
}

// end: pod has ended.
func (e *podEnds) end(ctx context.Context, pod string) {
	if !e.followed[pod] {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended[pod] {
		return
	}
	e.ended[pod] = true
	go e.cancelAfterGrace(ctx, e.cancels[pod])
	delete(e.cancels, pod)
}

func (e *podEnds) cancelAfterGrace(ctx context.Context, cancels []context.CancelFunc) {
	select {
	case <-ctx.Done():
	case <-e.clock.After(podEndGrace):
		for _, cancel := range cancels {
			cancel()
		}
	}
}

// watchEnds watches the mirror's pods from the list's resourceVersion
// until ctx ends, telling ends of each that ends: one watch for all the
// request's streams, where each would otherwise poll its pod. A watch that
// ends is made again, from the pods as they are then; one the worker
// refuses is said on the log, whose streams then end with their pods'
// logs or the manager's limit on a followed log.
func (s *Server) watchEnds(ctx context.Context, side mirrorSide, resourceVersion string, ends *podEnds, out *logWriter) {
	for ctx.Err() == nil {
		w, err := side.worker.WatchPods(ctx, side.mirror, resourceVersion)
		if err == nil {
			for ev := range w.ResultChan() {
				switch pod, ok := ev.Object.(*corev1.Pod); {
				case ok && metav1.IsControlledBy(pod, side.mirror) && (ev.Type == watch.Deleted || podEnded(pod)):
					ends.end(ctx, pod.Name)
				case ev.Type == watch.Error:
					err = apierrors.FromObject(ev.Object)
				}
			}
			w.Stop()
		}
		if apierrors.IsForbidden(err) {
			out.line("jobferry: " + readRefused(side.placement.worker, "watch the mirror's pods, to end each followed log as its pod ends", err))
			return
		}
		resourceVersion = ""
		select {
		case <-ctx.Done():
		case <-s.Clock.After(rewatch):
		}
	}
}

// logWriter writes whole lines to the response, flushing each, until the
// byte limit; the first line's write sends the 200. A failure before any
// line is the response's status; after, a last line saying it.
type logWriter struct {
	mu         sync.Mutex
	w          http.ResponseWriter
	limit      int64
	remaining  int64
	managerCap bool
	wrote, cut bool
	// done: the answer is finished; nothing more is written.
	done     bool
	failures []error
	// flushing: a flush of the lines written is due within flushEvery;
	// flushErr is why the last one failed (the caller went away).
	flushing bool
	flushErr error
}

// flushEvery gathers the lines a log answer writes within it into one
// flush: each flush is a frame through the aggregator and the manager
// cluster's API server, whose CPU dispatch shares, so a log of many lines a
// second (every pod of a Job followed at once) costs frames at this pace,
// not per line. A tenant sees a line at most this much later.
const flushEvery = 50 * time.Millisecond

// budget is what a stream may still bring (the worker's limitBytes).
func (l *logWriter) budget() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.remaining, 1)
}

// full: the byte limit is reached.
func (l *logWriter) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining <= 0
}

// line writes one line; false once the limit is reached.
func (l *logWriter) line(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	if l.remaining <= 0 {
		l.cut = true
		return false
	}
	b := []byte(s + "\n")
	if int64(len(b)) > l.remaining {
		b, l.cut = b[:l.remaining], true
	}
	if l.flushErr != nil {
		return false
	}
	l.start()
	if !l.flushing {
		// The first line of a flush window. A caller that stops reading
		// loses its log, rather than holding its streams: the window's
		// writes and its flush have writeTimeout, and flush lifts the
		// deadline, as between windows a followed log may be quiet for
		// long (an HTTP/2 stream is reset when a deadline passes, write or
		// not). Once a window, not once a line: each deadline set is a
		// message to the connection's serving goroutine.
		_ = http.NewResponseController(l.w).SetWriteDeadline(time.Now().Add(writeTimeout))
		l.flushing = true
		time.AfterFunc(flushEvery, l.flush)
	}
	n, err := l.w.Write(b)
	l.remaining -= int64(n)
	return err == nil && !l.cut
}

// end marks the answer finished, as finish does, for a handler that
// returns without it.
func (l *logWriter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
}

// flush sends the lines written since the last flush, unless the answer
// is finished (net/http sends the rest then).
func (l *logWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushing = false
	if l.done {
		return
	}
	// Within the deadline the window's first line set.
	rc := http.NewResponseController(l.w)
	if err := rc.Flush(); err != nil {
		l.flushErr = err
	}
	_ = rc.SetWriteDeadline(time.Time{})
}

func (l *logWriter) start() {
	if !l.wrote {
		l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		l.w.WriteHeader(http.StatusOK)
		l.wrote = true
	}
}

func (l *logWriter) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, err)
}

// finish ends the response: the failures as its status when nothing was
// written, else as last lines, and the manager's cut when it cut.
func (l *logWriter) finish(w http.ResponseWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if !l.wrote && len(l.failures) > 0 {
		writeStatus(w, apierrors.NewServiceUnavailable(errors.Join(l.failures...).Error()))
		return
	}
	l.start()
	for _, err := range l.failures {
		fmt.Fprintf(w, "jobferry: %v\n", err)
	}
	if l.cut && l.managerCap {
		fmt.Fprintf(w, "\njobferry: the log was cut at the manager's limit of %d bytes a request\n", l.limit)
	}
}

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
