package workers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
	"github.com/jobferry/jobferry/mirror"
)

// Pool holds the manager's connections to its workers, one per
// WorkerCluster: it builds one from the kubeconfig Secret (refusing unsafe
// kubeconfigs), probes it, reviews its credential's rights, renews its
// token, and watches the worker's Warning Events, each when the
// WorkerCluster controller asks (package workercluster, which writes what
// it finds in the WorkerCluster's status). It knows no manager Job: it tells
// its subscribers (Subscribe, SubscribeConnected) what happens on the
// workers, and they decide what that means for their Jobs.
type Pool struct {
	// Client reads the kubeconfig Secrets and writes renewed tokens into
	// them.
	Client client.Client
	Scheme *runtime.Scheme
	// Namespace holds the kubeconfig Secrets.
	Namespace string
	Origin    string
	// ManagerID identifies this installation on the workers
	// (installation.ID).
	ManagerID string
	// QPS and Burst of each worker's client: high, so dispatch is never
	// throttled by the client (MultiKueue's 5 QPS capped it at ~1 Job/s).
	QPS   float32
	Burst int
	Clock clock.Clock
	// CreateNamespaces: the manager creates mirrors' namespaces on workers,
	// so their credentials need that right too.
	CreateNamespaces bool
	// Recorder reports credential renewals on the WorkerCluster.
	Recorder events.EventRecorder
	// RenewalThreshold is the fraction of a worker token's lifetime after
	// which the manager renews it (DefaultRenewalThreshold when 0).
	RenewalThreshold float64
	// Leading is closed once this replica leads (the controller manager's
	// Elected); nil: it leads from the start. Until then the pool may hold
	// connections (a warm standby: Standby) but tells no subscriber of
	// them and asks its controller for no reconcile: their controllers
	// run on the leader only.
	Leading <-chan struct{}
	// HeldBackFor is how long before this replica's election a mirror
	// change held back meanwhile is told (TellHeldBack); 0: every one
	// remembered. The old leader copied what it saw while it lived, so
	// only the last seconds before the election matter; telling a
	// standby's whole memory would put every change since it started
	// ahead of those.
	HeldBackFor time.Duration

	// build makes a worker's connection from its REST config: newConnection,
	// unless a test puts its own here (connect_test.go).
	build connectionBuilder

	// workerEvents asks the WorkerCluster controller for a reconcile
	// (Requests).
	workerEvents chan event.GenericEvent

	// connecting serializes Connect per worker: the WorkerCluster
	// controller and, as the replica takes the lease, the standby's last
	// round may connect the same worker at once.
	connecting workerLocks

	// held are the mirror changes held back while the replica does not
	// lead, told at the election (TellHeldBack).
	held heldBack

	mu    sync.RWMutex
	conns map[string]*Connection
	// subscribers are told what happens on the workers (Subscribe), and
	// connectedSubscribers of each worker that becomes Connected
	// (SubscribeConnected); both guarded by mu.
	subscribers          []Handlers
	connectedSubscribers []chan<- string
}

// NewPool completes a Pool whose exported fields are set.
func NewPool(p *Pool) *Pool {
	p.Recorder = eventnote.Bound(p.Recorder)
	if p.Clock == nil {
		p.Clock = clock.RealClock{}
	}
	p.conns = map[string]*Connection{}
	p.workerEvents = make(chan event.GenericEvent, 64)
	return p
}

// Leads says whether this replica leads (see Leading).
func (p *Pool) Leads() bool {
	if p.Leading == nil {
		return true
	}
	select {
	case <-p.Leading:
		return true
	default:
		return false
	}
}

// Handlers are what a subscriber is told of the workers (Subscribe);
// a nil field is not called. They run on the pool's goroutines (the
// workers' informers, the WorkerCluster controller) and must not block,
// but Warning, which may until ctx ends.
type Handlers struct {
	// MirrorChanged: a Job of this installation on worker was added,
	// updated or deleted, as the worker's cache sees it.
	MirrorChanged func(worker string, job *batchv1.Job)
	// MirrorsHeldBack: the mirrors that changed while the replica stood by
	// (the workers' caches hold their latest state), told once, as it
	// leads. It may block until the subscriber takes them.
	MirrorsHeldBack func(changes []MirrorChange)
	// CapacityChanged: the worker's capacity summary changed.
	CapacityChanged func(worker string)
	// WorkerReconciled: the WorkerCluster was looked at (its connection,
	// rights, labels or cordon may have changed; so may time).
	WorkerReconciled func(worker string)
	// PlacementsAffected: the Jobs placed on worker, and when unplaced the
	// Jobs not placed, deserve a look now — the worker connected, was lost
	// or deleted, or its credential got the rights it lacked.
	PlacementsAffected func(ctx context.Context, worker string, unplaced bool)
	// Warning: a Warning Event on the worker (warnings.go).
	Warning func(ctx context.Context, w Warning)
}

// Subscribe has h told of what happens on the workers from now on.
func (p *Pool) Subscribe(h Handlers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subscribers = append(p.subscribers, h)
}

// handlers are the subscribers' handlers now.
func (p *Pool) handlers() []Handlers {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.subscribers)
}

// SubscribeConnected returns a channel that gets the name of each worker
// that becomes Connected, for a subscriber that reads it in its own loop.
// A subscriber that falls behind by more than buffer names misses the
// ones after (logged): it must also look at every worker now and then.
func (p *Pool) SubscribeConnected(buffer int) <-chan string {
	ch := make(chan string, buffer)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connectedSubscribers = append(p.connectedSubscribers, ch)
	return ch
}

// TellConnected tells every subscriber that worker became Connected,
// without waiting for any.
func (p *Pool) TellConnected(ctx context.Context, worker string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, ch := range p.connectedSubscribers {
		select {
		case ch <- worker:
		default:
			logf.FromContext(ctx).Info("a subscriber to connected workers is behind; it is not told of this one", "worker", worker)
		}
	}
}

// Connect brings the worker's connection in line with its Secret and
// probes it; it returns the Connected condition, and the connection (nil
// when there is none).
func (p *Pool) Connect(ctx context.Context, wc *v1alpha1.WorkerCluster) (metav1.Condition, *Connection) {
	defer p.connecting.lock(wc.Name)()
	notConnected := func(reason, format string, args ...any) (metav1.Condition, *Connection) {
		p.Drop(wc.Name)
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}, nil
	}
	ref := wc.Spec.KubeConfig.SecretRef
	data, refused := workerkubeconfig.FromSecret(ctx, p.Client, p.Namespace, wc)
	if refused != nil {
		return notConnected(refused.Reason, "%s", refused.Message)
	}
	// The connection is rebuilt when the kubeconfig or the namespaces the
	// manager may use there change (they scope the cache); a new token for
	// the same ServiceAccount (a renewal, or the worker joined again) is
	// swapped into the live connection instead.
	// A kubeconfig that cannot be read has no token here; it is refused
	// below with the reason.
	token, _ := kubeconfigToken(data)
	hash := connectionHash(data, token, wc.Spec.Namespaces)

	p.mu.RLock()
	conn := p.conns[wc.Name]
	p.mu.RUnlock()
	if conn != nil && conn.kubeconfigHash == hash && conn.token.get() != token {
		conn.token.set(token)
		logf.FromContext(ctx).Info("using the worker's new token in the live connection", "worker", wc.Name)
	}
	if conn != nil && conn.cacheFailed.Load() != nil {
		logf.FromContext(ctx).Error(*conn.cacheFailed.Load(), "the caches of the worker stopped; connecting again", "worker", wc.Name)
		p.Drop(wc.Name)
		conn = nil
	}
	if conn == nil || conn.kubeconfigHash != hash {
		var reason, message string
		if conn, reason, message = p.dial(ctx, wc, data, hash); conn == nil {
			return notConnected(reason, "%s", message)
		}
	}
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.probe(probeCtx); err != nil {
		if apierrors.IsUnauthorized(err) {
			// It answers: its mirrors may well run. Not a lost worker.
			return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCredentialRejected,
				Message: credentialRejected(conn.config.Host, p.Namespace, ref.Name, wc.Name)}, conn
		}
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable,
			Message: fmt.Sprintf("%s: %v (%d failed probes)", conn.config.Host, err, conn.failures.Load())}, conn
	}
	if !conn.synced.Load() {
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConnecting,
			Message: "the worker answers; waiting for its caches to sync"}, conn
	}
	return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected,
		Message: fmt.Sprintf("connected to %s", conn.config.Host)}, conn
}

// dial builds the connection to the worker from its kubeconfig (data) and
// puts it in the pool; nil, with the Connected reason and message, when it
// cannot.
func (p *Pool) dial(ctx context.Context, wc *v1alpha1.WorkerCluster, data []byte, hash string) (*Connection, string, string) {
	ref := wc.Spec.KubeConfig.SecretRef
	cfg, err := workerkubeconfig.RESTConfig(data)
	if err != nil {
		return nil, workerkubeconfig.Reason(err), fmt.Sprintf("Secret %s/%s, key %s: %v", p.Namespace, ref.Name, ref.KeyOrDefault(), err)
	}
	cfg.QPS, cfg.Burst = p.QPS, p.Burst
	cfg.UserAgent = "jobferry-manager/" + p.Origin
	swappable := &swappableToken{}
	swappable.install(cfg)
	worker := wc.Name
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{worker: worker, next: rt} })
	build := p.build
	if build == nil {
		build = newConnection
	}
	conn, err := build(wc.Name, cfg, swappable, hash, p.Origin, p.ManagerID, wc.Spec.Namespaces, p.Scheme, p.Clock, connHandlers{
		mirrorChanged:   p.mirrorChanged,
		capacityChanged: p.capacityChanged,
		synced:          p.reconcileWorker,
		cacheFailed:     p.reconcileWorker,
		unanswered:      p.reconcileWorker,
	})
	if err != nil {
		// Building the cache asks the server for its API resources: a
		// server that answers 401 there refuses the credential, and
		// answers — its mirrors may well run, so it must not count
		// towards the worker-lost timeout.
		if apierrors.IsUnauthorized(err) {
			return nil, v1alpha1.ReasonCredentialRejected, credentialRejected(cfg.Host, p.Namespace, ref.Name, wc.Name)
		}
		return nil, v1alpha1.ReasonUnreachable, fmt.Sprintf("%s: %v", cfg.Host, err)
	}
	p.replace(wc.Name, conn)
	logf.FromContext(ctx).Info("connecting to worker", "worker", wc.Name, "server", cfg.Host)
	return conn, "", ""
}

// credentialRejected is the Connected message of a worker whose API server
// answers 401, whether to the probe or while its connection is built.
func credentialRejected(host, namespace, secret, worker string) string {
	return fmt.Sprintf("%s refuses the credential in Secret %s/%s (401 Unauthorized): its token is invalid or has expired; `kubectl jobferry join %s` writes a new one",
		host, namespace, secret, worker)
}

// connectionHash identifies what a worker connection is built from: the
// kubeconfig with its token replaced by whom it authenticates, and the
// namespaces the manager may use there.
func connectionHash(kubeconfig []byte, token string, namespaces []string) string {
	if token != "" {
		if replaced, err := withToken(kubeconfig, identity(token)); err == nil {
			kubeconfig = replaced
		}
	}
	sum := sha256.Sum256(append(slices.Clone(kubeconfig), []byte("\x00"+strings.Join(namespaces, ","))...))
	return hex.EncodeToString(sum[:])
}

// ReviewRights checks the credential's rights when due (see
// rightsCheckInterval) or when forced, and returns the Authorized condition.
// When rights that were missing have all been granted, the Jobs placed on
// the worker and the unplaced ones are looked at again at once, not after
// their back-off.
func (p *Pool) ReviewRights(ctx context.Context, conn *Connection, force bool) metav1.Condition {
	log := logf.FromContext(ctx).WithValues("worker", conn.name)
	prev := conn.rights.Load()
	due := force || prev == nil || len(prev.missing) > 0 || p.Clock.Since(prev.checked) >= rightsCheckInterval
	state := prev
	if due {
		reviewCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rights := requiredRights(conn.namespaces)
		wantNamespaces := p.CreateNamespaces && len(conn.namespaces) == 0
		if wantNamespaces {
			rights = append(append(rights, CreateNamespacesRight, RelabelNamespacesRight), CollectNamespacesRights...)
		}
		optional := warningEventsRights(conn.namespaces)
		pods := podWarningsRights(conn.namespaces)
		rights = append(append(rights, optional...), pods...)
		missing, err := reviewRights(reviewCtx, conn.health, rights)
		if err != nil {
			log.Error(err, "reviewing the worker credential's rights")
			return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRightsUnknown,
				Message: err.Error()}
		}
		namespaces := NamespaceRights{Create: wantNamespaces && !slices.Contains(missing, CreateNamespacesRight)}
		namespaces.Relabel = namespaces.Create && !slices.Contains(missing, RelabelNamespacesRight)
		namespaces.Collect = namespaces.Create && !slices.ContainsFunc(missing, func(r Right) bool { return slices.Contains(CollectNamespacesRights, r) })
		mayWatch := !slices.ContainsFunc(missing, func(r Right) bool { return slices.Contains(optional, r) })
		mayReadPods := !slices.ContainsFunc(missing, func(r Right) bool { return slices.Contains(pods, r) })
		missing = slices.DeleteFunc(missing, func(r Right) bool {
			return r == CreateNamespacesRight || r == RelabelNamespacesRight || slices.Contains(CollectNamespacesRights, r) || slices.Contains(optional, r) || slices.Contains(pods, r)
		})
		state = &rightsState{checked: p.Clock.Now(), missing: missing, namespaces: namespaces, mayWatchWarnings: mayWatch, mayReadPods: mayReadPods}
		conn.rights.Store(state)
		switch {
		case len(missing) > 0 && (prev == nil || len(prev.missing) == 0):
			log.Info("worker credential lacks rights", "missing", MissingMessage(missing))
		case len(missing) == 0 && prev != nil && len(prev.missing) > 0:
			log.Info("worker credential has every right now")
			p.PlacementsAffected(ctx, conn.name, true)
		}
	}
	return authorizedCondition(state)
}

// authorizedCondition is the Authorized condition for what the last review
// of a worker credential's rights found.
func authorizedCondition(state *rightsState) metav1.Condition {
	if len(state.missing) > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMissingRights,
			Message: MissingMessage(state.missing) + "; no Job is placed here until it may"}
	}
	var message string
	switch {
	case state.namespaces.Relabel:
		message = "the credential has every right jobferry needs, and may create namespaces for mirrors and keep their Pod Security labels in step with the manager's"
	case state.namespaces.Create:
		message = "the credential has every right jobferry needs, and may create namespaces for mirrors; it may not " + RelabelNamespacesRight.String() +
			", so a namespace it created that the manager's Pod Security has since outgrown takes no more Jobs"
	default:
		message = "the credential has every right jobferry needs; it creates no namespace there, so Jobs go only to namespaces that exist"
	}
	if state.namespaces.Create && !state.namespaces.Collect {
		message += "; without all of " + rightsList(CollectNamespacesRights) +
			", the namespaces it created stay there once the manager's are gone (the worker chart grants them with managerIdentity.allowNamespaceDeletion)"
	}
	switch {
	case !state.mayWatchWarnings:
		message += "; it may not list and watch Events, so the Warning Events of mirrors and their pods (FailedScheduling, evictions) do not reach the manager Jobs"
	case !state.mayReadPods:
		message += "; it may not get pods, so the Warning Events of the mirrors' pods (FailedScheduling, evictions) do not reach the manager Jobs, only the mirrors' own"
	}
	return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAuthorized, Message: message}
}

// RecheckRights reviews a worker's rights now, after a write there was
// refused as forbidden, and has its condition rewritten; it returns the
// rights found missing.
func (p *Pool) RecheckRights(ctx context.Context, worker string) []Right {
	conn := p.connection(worker)
	if conn == nil || !conn.Connected() {
		return nil
	}
	p.ReviewRights(ctx, conn, true)
	p.reconcileWorker(worker)
	return conn.MissingRights()
}

// RightsRefused has a worker's rights reviewed at its next reconcile, now
// due: a read there was refused. Unlike recheckRights it does not wait for
// the review, so a caller holding the placement lock is not held up by it.
func (p *Pool) RightsRefused(worker string) {
	conn := p.connection(worker)
	if conn == nil || conn.reviewDue.Swap(true) {
		return
	}
	p.reconcileWorker(worker)
}

// ReadNamespaces refreshes, on every connected worker the manager may use
// it on, what it knows of namespace ns (see Connection.Namespace). A worker that
// does not answer is left to placement, which reads it again.
func (p *Pool) ReadNamespaces(ctx context.Context, ns string) {
	for _, name := range p.Names() {
		if conn := p.connection(name); conn != nil && conn.Connected() && conn.MayUse(ns) {
			if _, err := conn.Namespace(ctx, ns); err != nil {
				logf.FromContext(ctx).V(1).Info("reading a worker namespace before placement", "worker", name, "error", err.Error())
			}
		}
	}
}

// reconcileWorker asks for a reconcile of the WorkerCluster worker. Not
// leading, nothing does: the standby's next round looks at the worker, and
// the controller reconciles every worker once it leads.
func (p *Pool) reconcileWorker(worker string) {
	if !p.Leads() {
		return
	}
	p.workerEvents <- event.GenericEvent{Object: &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: worker}}}
}

func (p *Pool) replace(name string, conn *Connection) {
	p.mu.Lock()
	old := p.conns[name]
	p.conns[name] = conn
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

func (p *Pool) Drop(name string) {
	p.mu.Lock()
	old := p.conns[name]
	delete(p.conns, name)
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// connection returns the connection to a worker, nil when there is none.
func (p *Pool) connection(name string) *Connection {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.conns[name]
}

// Conn is the connection to a worker as the Job controller uses it; nil
// when there is none.
func (p *Pool) Conn(name string) Conn {
	if conn := p.connection(name); conn != nil {
		return conn
	}
	return nil
}

// Names lists the workers the pool holds a connection for.
func (p *Pool) Names() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.conns))
	for name := range p.conns {
		out = append(out, name)
	}
	return out
}

func (p *Pool) Connected(name string) bool {
	conn := p.connection(name)
	return conn != nil && conn.Connected()
}

// mirrorChanged tells the subscribers a mirror changed, while leading:
// before, the Job controller does not run, so the change is held back
// until the election (TellHeldBack) — unless the cache found the mirror in
// its first list (listed): the Job controller's own first list looks at
// every Job once it leads, and a replica that connected just before its
// election would otherwise tell every mirror there is ahead of the
// changes.
func (p *Pool) mirrorChanged(worker string, job *batchv1.Job, listed bool) {
	if mirror.OtherManager(job, p.ManagerID) {
		// Another installation's, with the same origin: nothing of this
		// manager's, but the WorkerCluster says so.
		conn := p.connection(worker)
		if conn != nil && conn.sharedOrigin.CompareAndSwap(nil, &OriginConflict{Manager: job.Labels[v1alpha1.ManagerIDLabel],
			Job: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}}) {
			p.reconcileWorker(worker)
		}
		return
	}
	if !p.Leads() && (listed || p.held.hold(MirrorChange{Worker: worker, Job: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, Seen: p.Clock.Now()})) {
		return
	}
	for _, h := range p.handlers() {
		if h.MirrorChanged != nil {
			h.MirrorChanged(worker, job)
		}
	}
}

// TellHeldBack tells the subscribers the mirror changes held back while
// the replica did not lead; from then on none is held back. The standby
// calls it once the replica leads.
func (p *Pool) TellHeldBack(ctx context.Context) {
	var since time.Time
	if p.HeldBackFor > 0 {
		since = p.Clock.Now().Add(-p.HeldBackFor)
	}
	changes, overwritten := p.held.handOver(since)
	logf.FromContext(ctx).Info("telling the mirror changes seen while standing by", "mirrors", len(changes), "since", since, "overwritten", overwritten)
	if len(changes) == 0 {
		return
	}
	for _, h := range p.handlers() {
		if h.MirrorsHeldBack != nil {
			h.MirrorsHeldBack(changes)
		}
	}
}

func (p *Pool) capacityChanged(worker string) {
	if !p.Leads() {
		return
	}
	for _, h := range p.handlers() {
		if h.CapacityChanged != nil {
			h.CapacityChanged(worker)
		}
	}
}

// WorkerReconciled tells the subscribers the WorkerCluster worker was
// looked at.
func (p *Pool) WorkerReconciled(worker string) {
	for _, h := range p.handlers() {
		if h.WorkerReconciled != nil {
			h.WorkerReconciled(worker)
		}
	}
}

// Requests are the WorkerClusters the pool asks its controller to look at:
// a worker's caches synced or stopped, another installation's mirror was
// seen there, or a request there was refused as forbidden.
func (p *Pool) Requests() <-chan event.GenericEvent { return p.workerEvents }

// PlacementsAffected tells the subscribers the Jobs placed on worker (and,
// when unplaced, those not placed) deserve a look.
func (p *Pool) PlacementsAffected(ctx context.Context, worker string, unplaced bool) {
	for _, h := range p.handlers() {
		if h.PlacementsAffected != nil {
			h.PlacementsAffected(ctx, worker, unplaced)
		}
	}
}

// workerLocks are a lock per worker name, made on first use and kept: one
// per WorkerCluster name ever connected, a few bytes each.
type workerLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// lock takes the worker's lock and returns its release.
func (l *workerLocks) lock(worker string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	m := l.locks[worker]
	if m == nil {
		m = &sync.Mutex{}
		l.locks[worker] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}
