package manager

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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/internal/workerkubeconfig"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/mirror"
)

// The rights the registry uses on the manager cluster (see jobs.go); the
// kubeconfig Secrets are read in the manager's namespace (cmd/manager).
// +kubebuilder:rbac:groups=jobferry.dev,resources=workerclusters,verbs=list;watch
// +kubebuilder:rbac:groups=jobferry.dev,resources=workerclusters/status,verbs=update

// Registry connects the manager to its workers: for each WorkerCluster it
// reads the kubeconfig Secret, refuses unsafe kubeconfigs, keeps a remote
// client and cache, probes the worker's health with backoff, and reports all
// of it in the Connected condition. A rotated Secret rebuilds the connection.
type Registry struct {
	Client client.Client
	Scheme *runtime.Scheme
	// Namespace holds the kubeconfig Secrets.
	Namespace string
	Origin    string
	// ManagerID identifies this installation on the workers
	// (InstallationID).
	ManagerID string
	// QPS and Burst of each worker's client: high, so dispatch is never
	// throttled by the client (MultiKueue's 5 QPS capped it at ~1 Job/s).
	QPS            float32
	Burst          int
	HealthInterval time.Duration
	Clock          clock.Clock
	// CreateNamespaces: the manager creates mirrors' namespaces on workers,
	// so their credentials need that right too.
	CreateNamespaces bool
	// Recorder reports credential renewals on the WorkerCluster.
	Recorder events.EventRecorder
	// RenewalThreshold is the fraction of a worker token's lifetime after
	// which the manager renews it (DefaultRenewalThreshold when 0).
	RenewalThreshold float64

	// workerEvents asks for a WorkerCluster reconcile (cache synced).
	workerEvents chan event.GenericEvent

	mu      sync.RWMutex
	remotes map[string]*Connection
	// subscribers are told what happens on the workers (Subscribe), and
	// connectedSubscribers of each worker that becomes Connected
	// (SubscribeConnected); both guarded by mu.
	subscribers          []Handlers
	connectedSubscribers []chan<- string
}

// countsRefresh bounds how often a worker's status is rewritten for its Job
// counts (the DISPATCHED and RUNNING columns) while Jobs come and go.
const countsRefresh = 2 * time.Second

// rightsRetry is how often a worker whose credential lacks rights is checked
// again, so Jobs proceed within seconds of the rights being granted.
const rightsRetry = 3 * time.Second

// NewRegistry completes a Registry whose exported fields are set.
func NewRegistry(r *Registry) *Registry {
	r.Recorder = eventnote.Bound(r.Recorder)
	r.remotes = map[string]*Connection{}
	r.workerEvents = make(chan event.GenericEvent, 64)
	return r
}

// Handlers are what a subscriber is told of the workers (Subscribe);
// a nil field is not called. They run on the registry's goroutines (the
// workers' informers, the WorkerCluster controller) and must not block,
// but Warning, which may until ctx ends.
type Handlers struct {
	// MirrorChanged: a Job of this installation on worker was added,
	// updated or deleted, as the worker's cache sees it.
	MirrorChanged func(worker string, job *batchv1.Job)
	// CapacityChanged: the worker's capacity summary changed.
	CapacityChanged func(worker string)
	// WorkerReconciled: the WorkerCluster was looked at (its connection,
	// rights, labels or cordon may have changed; so may time).
	WorkerReconciled func(worker string)
	// PlacementsAffected: the Jobs placed on worker, and when unplaced the
	// Jobs not placed, deserve a look now — the worker connected, was lost
	// or deleted, or its credential got the rights it lacked.
	PlacementsAffected func(ctx context.Context, worker string, unplaced bool)
	// Warning: a Warning Event on the worker (workerwarnings.go).
	Warning func(ctx context.Context, w Warning)
}

// Subscribe has h told of what happens on the workers from now on.
func (r *Registry) Subscribe(h Handlers) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subscribers = append(r.subscribers, h)
}

// handlers are the subscribers' handlers now.
func (r *Registry) handlers() []Handlers {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.subscribers)
}

// SetupWithManager registers the WorkerCluster controller, and the index of
// manager Jobs by placement the registry and the Job controller read.
func (r *Registry) SetupWithManager(mgr ctrl.Manager) error {
	if err := managercache.IndexJobs(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(newCapacityCollector(r)); err != nil {
		return fmt.Errorf("registering the worker capacity metrics: %w", err)
	}
	secretToWorkers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list v1alpha1.WorkerClusterList
		if err := r.Client.List(ctx, &list); err != nil {
			// A read of the manager's own cache: the next probe of each
			// worker reads its Secret again anyway.
			logf.FromContext(ctx).Error(err, "listing WorkerClusters for a changed Secret", "secret", obj.GetName())
			return nil
		}
		var out []reconcile.Request
		for _, wc := range list.Items {
			if wc.Spec.KubeConfig.SecretRef.Name == obj.GetName() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: wc.Name}})
			}
		}
		return out
	})
	inNamespace := predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetNamespace() == r.Namespace })
	return ctrl.NewControllerManagedBy(mgr).
		Named("workercluster").
		// Its own status writes must not reconcile it again: while a worker
		// is unreachable each probe changes the message (the failure count),
		// which would otherwise loop as fast as probes fail.
		For(&v1alpha1.WorkerCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, secretToWorkers, builder.WithPredicates(inNamespace)).
		Watches(&batchv1.Job{}, jobCountsHandler{reader: r.Client}).
		WatchesRawSource(source.Channel(r.Requests(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile computes the Connected condition of one WorkerCluster, keeping
// its remote connection in step with the Secret, and writes what changed.
func (r *Registry) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, wc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Drop(req.Name)
			metrics.ForgetWorker(req.Name)
			// Its Jobs start counting towards the worker-lost timeout.
			r.PlacementsAffected(ctx, req.Name, false)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	metrics.InitWorker(wc.Name)
	facts, err := r.workerFacts(ctx, wc)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := decideWorker(wc, facts, r.HealthInterval)
	if old := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected); old == nil || old.Status != facts.connected.Status || old.Reason != facts.connected.Reason {
		logf.FromContext(ctx).Info("worker connection changed", "connected", facts.connected.Status, "reason", facts.connected.Reason, "message", facts.connected.Message)
	}
	if d.write {
		wc.Status = d.status
		if err := r.Client.Status().Update(ctx, wc); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing status of WorkerCluster %s: %w", wc.Name, err)
		}
	}
	metrics.SetWorkerConnected(wc.Name, d.connected)
	if d.lost {
		// Its Jobs start counting towards the worker-lost timeout.
		r.PlacementsAffected(ctx, wc.Name, false)
	}
	if d.connectedNow {
		// Mirror events seen while the caches synced found the worker not
		// yet connected: look at its Jobs again, and at the unplaced ones,
		// which may fit now.
		r.PlacementsAffected(ctx, wc.Name, true)
		r.TellConnected(ctx, wc.Name)
	}
	// A change of the worker (uncordoned, relabelled, its rights or
	// connection back) may give waiting Jobs room; so may time, as this
	// runs with every health probe.
	r.WorkerReconciled(wc.Name)
	return reconcile.Result{RequeueAfter: d.requeue}, nil
}

// workerFacts are what one reconcile of a WorkerCluster finds, phase by
// phase, for decideWorker: the connection, then — while there is one — the
// credential's rights, another installation with the same origin, the
// Warning Events watch, the capacity summary and the credential's renewal,
// and the manager Jobs placed there.
type workerFacts struct {
	// connected is the Connected condition the connection phase found.
	connected metav1.Condition
	// hasConnection: a connection exists (it may not answer);
	// probeFailures counts its failed probes in a row.
	hasConnection bool
	probeFailures int32
	// authorized is the Authorized condition; nil when the rights were not
	// reviewed (the worker does not answer).
	authorized *metav1.Condition
	// origin is the OriginExclusive condition; nil without a connection.
	origin *metav1.Condition
	// capacity is the worker's summary; nil when none is known now.
	capacity *v1alpha1.ClusterCapacityStatus
	// With a connection, the credential phase found credential,
	// credentialCondition (nil: the token does not expire) and
	// credentialAfter (0: no renewal due).
	credential          *v1alpha1.CredentialStatus
	credentialCondition *metav1.Condition
	credentialAfter     time.Duration
	// dispatched and running count the unfinished manager Jobs placed there.
	dispatched, running int32
}

// workerFacts runs the phases of a WorkerCluster reconcile that read (and,
// for the connection, rights review, Events watch and token renewal, act
// on) the worker, and returns what they found.
func (r *Registry) workerFacts(ctx context.Context, wc *v1alpha1.WorkerCluster) (workerFacts, error) {
	var f workerFacts
	var rem *Connection
	f.connected, rem = r.Connect(ctx, wc)
	if rem != nil {
		f.hasConnection, f.probeFailures = true, rem.Failures()
		// Reviewed as soon as the worker answers: a credential that may
		// not list what the manager caches leaves it Connecting, and the
		// Authorized condition says why.
		if rem.Healthy() {
			authorized := r.ReviewRights(ctx, rem, rem.TakeReviewDue())
			f.authorized = &authorized
		}
		origin := originCondition(r.Origin, rem.OriginConflict())
		f.origin = &origin
		r.KeepWarningsWatch(ctx, rem)
		f.capacity = rem.Capacity(ctx)
		f.credential, f.credentialCondition, f.credentialAfter = r.KeepCredential(ctx, wc, rem)
	}
	var err error
	f.dispatched, f.running, err = r.countJobs(ctx, wc.Name)
	return f, err
}

// workerDecision is what decideWorker makes of the facts.
type workerDecision struct {
	// status is the WorkerCluster's new status; write: it differs from
	// the one read.
	status v1alpha1.WorkerClusterStatus
	write  bool
	// requeue is when the worker is looked at again.
	requeue time.Duration
	// connected: the worker is Connected now; connectedNow and lost: it
	// became Connected, or stopped being, since the status last written
	// (not the live connection, which may have changed between two
	// reconciles).
	connected, connectedNow, lost bool
}

// decideWorker is the WorkerCluster controller's decision: the status the
// facts give (each condition with the generation it was found for; a
// capacity summary, once seen, kept while none is known; the credential
// condition removed once the token does not expire), whether to write it,
// when to look again (the health interval, sooner while probes fail, rights
// are missing or a renewal is due), and the transitions of Connected.
func decideWorker(wc *v1alpha1.WorkerCluster, f workerFacts, healthInterval time.Duration) workerDecision {
	d := workerDecision{requeue: healthInterval}
	status := wc.Status.DeepCopy()
	set := func(c metav1.Condition) {
		c.ObservedGeneration = wc.Generation
		meta.SetStatusCondition(&status.Conditions, c)
	}
	set(f.connected)
	d.connected = f.connected.Status == metav1.ConditionTrue
	if f.hasConnection && !d.connected {
		d.requeue = backoff(f.probeFailures)
	}
	if f.authorized != nil {
		set(*f.authorized)
		if f.authorized.Status != metav1.ConditionTrue {
			d.requeue = min(d.requeue, rightsRetry)
		}
	}
	if f.origin != nil {
		set(*f.origin)
	}
	if f.capacity != nil {
		status.Capacity = f.capacity
	}
	if f.hasConnection {
		status.Credential = f.credential
		if f.credentialCondition != nil {
			set(*f.credentialCondition)
		} else {
			meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionCredentialRenewal)
		}
		if f.credentialAfter > 0 {
			d.requeue = min(d.requeue, f.credentialAfter)
		}
	}
	status.DispatchedJobs, status.RunningJobs = f.dispatched, f.running
	d.status, d.write = *status, !equality.Semantic.DeepEqual(status, &wc.Status)
	wasConnected := meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionConnected)
	d.connectedNow, d.lost = d.connected && !wasConnected, !d.connected && wasConnected
	return d
}

// SubscribeConnected returns a channel that gets the name of each worker
// that becomes Connected, for a subscriber that reads it in its own loop.
// A subscriber that falls behind by more than buffer names misses the
// ones after (logged): it must also look at every worker now and then.
func (r *Registry) SubscribeConnected(buffer int) <-chan string {
	ch := make(chan string, buffer)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connectedSubscribers = append(r.connectedSubscribers, ch)
	return ch
}

// TellConnected tells every subscriber that worker became Connected,
// without waiting for any.
func (r *Registry) TellConnected(ctx context.Context, worker string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, ch := range r.connectedSubscribers {
		select {
		case ch <- worker:
		default:
			logf.FromContext(ctx).Info("a subscriber to connected workers is behind; it is not told of this one", "worker", worker)
		}
	}
}

// Connect brings the remote in line with the Secret and probes it.
func (r *Registry) Connect(ctx context.Context, wc *v1alpha1.WorkerCluster) (metav1.Condition, *Connection) {
	notConnected := func(reason, format string, args ...any) (metav1.Condition, *Connection) {
		r.Drop(wc.Name)
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}, nil
	}
	ref := wc.Spec.KubeConfig.SecretRef
	key := ref.KeyOrDefault()
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return notConnected(v1alpha1.ReasonSecretNotFound, "Secret %s/%s not found", r.Namespace, ref.Name)
		}
		return notConnected(v1alpha1.ReasonSecretUnreadable, "reading Secret %s/%s: %v", r.Namespace, ref.Name, err)
	}
	data, ok := secret.Data[key]
	if !ok {
		return notConnected(v1alpha1.ReasonKubeConfigKeyMissing, "Secret %s/%s has no key %q", r.Namespace, ref.Name, key)
	}
	// The connection is rebuilt when the kubeconfig or the namespaces the
	// manager may use there change (they scope the cache); a new token for
	// the same ServiceAccount (a renewal, or the worker joined again) is
	// swapped into the live connection instead.
	// A kubeconfig that cannot be read has no token here; it is refused
	// below with the reason.
	token, _ := kubeconfigToken(data)
	hash := connectionHash(data, token, wc.Spec.Namespaces)

	r.mu.RLock()
	rem := r.remotes[wc.Name]
	r.mu.RUnlock()
	if rem != nil && rem.kubeconfigHash == hash && rem.token.get() != token {
		rem.token.set(token)
		logf.FromContext(ctx).Info("using the worker's new token in the live connection", "worker", wc.Name)
	}
	if rem != nil && rem.cacheFailed.Load() != nil {
		logf.FromContext(ctx).Error(*rem.cacheFailed.Load(), "the caches of the worker stopped; connecting again", "worker", wc.Name)
		r.Drop(wc.Name)
		rem = nil
	}
	if rem == nil || rem.kubeconfigHash != hash {
		cfg, err := workerkubeconfig.RESTConfig(data)
		if err != nil {
			return notConnected(workerkubeconfig.Reason(err), "Secret %s/%s, key %s: %v", r.Namespace, ref.Name, key, err)
		}
		cfg.QPS, cfg.Burst = r.QPS, r.Burst
		cfg.UserAgent = "jobferry-manager/" + r.Origin
		swappable := &swappableToken{}
		swappable.install(cfg)
		worker := wc.Name
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{worker: worker, next: rt} })
		rem, err = newRemote(wc.Name, cfg, swappable, hash, r.Origin, wc.Spec.Namespaces, r.Scheme, r.Clock, remoteHandlers{
			mirrorChanged:   r.mirrorChanged,
			capacityChanged: r.capacityChanged,
			synced:          r.reconcileWorker,
			cacheFailed:     r.reconcileWorker,
		})
		if err != nil {
			// Building the cache asks the server for its API resources.
			return notConnected(v1alpha1.ReasonUnreachable, "%s: %v", cfg.Host, err)
		}
		r.replace(wc.Name, rem)
		logf.FromContext(ctx).Info("connecting to worker", "worker", wc.Name, "server", cfg.Host)
	}
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rem.probe(probeCtx); err != nil {
		if apierrors.IsUnauthorized(err) {
			// It answers: its mirrors may well run. Not a lost worker.
			return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCredentialRejected,
				Message: fmt.Sprintf("%s refuses the credential in Secret %s/%s (401 Unauthorized): its token is invalid or has expired; `kubectl jobferry join %s` writes a new one",
					rem.config.Host, r.Namespace, ref.Name, wc.Name)}, rem
		}
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable,
			Message: fmt.Sprintf("%s: %v (%d failed probes)", rem.config.Host, err, rem.failures.Load())}, rem
	}
	if !rem.synced.Load() {
		return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConnecting,
			Message: "the worker answers; waiting for its caches to sync"}, rem
	}
	return metav1.Condition{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConnected,
		Message: fmt.Sprintf("connected to %s", rem.config.Host)}, rem
}

// originCondition is the OriginExclusive condition, from the first mirror
// of another installation with the same origin seen (nil: none).
func originCondition(origin string, conflict *OriginConflict) metav1.Condition {
	if conflict == nil {
		return metav1.Condition{Type: v1alpha1.ConditionOriginExclusive, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonOriginExclusive,
			Message: fmt.Sprintf("no mirror of another jobferry manager with origin %q seen on this worker", origin)}
	}
	return metav1.Condition{Type: v1alpha1.ConditionOriginExclusive, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonOriginShared,
		Message: fmt.Sprintf("another jobferry manager (%s %s) with the same origin %q made mirrors on this worker, such as %s: "+
			"give each manager its own origin (--origin, chart value origin); meanwhile this manager deletes none of them, nor any mirror there that does not say which manager made it",
			v1alpha1.ManagerIDLabel, conflict.Manager, origin, conflict.Job)}
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
func (r *Registry) ReviewRights(ctx context.Context, rem *Connection, force bool) metav1.Condition {
	log := logf.FromContext(ctx).WithValues("worker", rem.name)
	prev := rem.rights.Load()
	due := force || prev == nil || len(prev.Missing) > 0 || r.Clock.Since(prev.Checked) >= rightsCheckInterval
	state := prev
	if due {
		reviewCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rights := requiredRights(rem.namespaces)
		wantNamespaces := r.CreateNamespaces && len(rem.namespaces) == 0
		if wantNamespaces {
			rights = append(rights, CreateNamespacesRight, RelabelNamespacesRight)
		}
		optional := warningEventsRights(rem.namespaces)
		rights = append(rights, optional...)
		missing, err := reviewRights(reviewCtx, rem.health, rights)
		if err != nil {
			log.Error(err, "reviewing the worker credential's rights")
			return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonRightsUnknown,
				Message: err.Error()}
		}
		namespaces := NamespaceRights{Create: wantNamespaces && !slices.Contains(missing, CreateNamespacesRight)}
		namespaces.Relabel = namespaces.Create && !slices.Contains(missing, RelabelNamespacesRight)
		mayWatch := !slices.ContainsFunc(missing, func(r Right) bool { return slices.Contains(optional, r) })
		missing = slices.DeleteFunc(missing, func(r Right) bool {
			return r == CreateNamespacesRight || r == RelabelNamespacesRight || slices.Contains(optional, r)
		})
		state = &RightsState{Checked: r.Clock.Now(), Missing: missing, Namespaces: namespaces, MayWatchWarnings: mayWatch}
		rem.rights.Store(state)
		switch {
		case len(missing) > 0 && (prev == nil || len(prev.Missing) == 0):
			log.Info("worker credential lacks rights", "missing", MissingMessage(missing))
		case len(missing) == 0 && prev != nil && len(prev.Missing) > 0:
			log.Info("worker credential has every right now")
			r.PlacementsAffected(ctx, rem.name, true)
		}
	}
	return authorizedCondition(state)
}

// authorizedCondition is the Authorized condition for what the last review
// of a worker credential's rights found.
func authorizedCondition(state *RightsState) metav1.Condition {
	if len(state.Missing) > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMissingRights,
			Message: MissingMessage(state.Missing) + "; no Job is placed here until it may"}
	}
	var message string
	switch {
	case state.Namespaces.Relabel:
		message = "the credential has every right jobferry needs, and may create namespaces for mirrors and keep their Pod Security labels in step with the manager's"
	case state.Namespaces.Create:
		message = "the credential has every right jobferry needs, and may create namespaces for mirrors; it may not " + RelabelNamespacesRight.String() +
			", so a namespace it created that the manager's Pod Security has since outgrown takes no more Jobs"
	default:
		message = "the credential has every right jobferry needs; it creates no namespace there, so Jobs go only to namespaces that exist"
	}
	if !state.MayWatchWarnings {
		message += "; it may not list and watch Events, so the Warning Events of mirrors and their pods (FailedScheduling, evictions) do not reach the manager Jobs"
	}
	return metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAuthorized, Message: message}
}

// RecheckRights reviews a worker's rights now, after a write there was
// refused as forbidden, and has its condition rewritten; it returns the
// rights found missing.
func (r *Registry) RecheckRights(ctx context.Context, worker string) []Right {
	rem := r.remote(worker)
	if rem == nil || !rem.Connected() {
		return nil
	}
	r.ReviewRights(ctx, rem, true)
	r.reconcileWorker(worker)
	return rem.MissingRights()
}

// RightsRefused has a worker's rights reviewed at its next reconcile, now
// due: a read there was refused. Unlike recheckRights it does not wait for
// the review, so a caller holding the placement lock is not held up by it.
func (r *Registry) RightsRefused(worker string) {
	rem := r.remote(worker)
	if rem == nil || rem.reviewDue.Swap(true) {
		return
	}
	r.reconcileWorker(worker)
}

// ReadNamespaces refreshes, on every connected worker the manager may use
// it on, what it knows of namespace ns (see remote.namespace). A worker that
// does not answer is left to placement, which reads it again.
func (r *Registry) ReadNamespaces(ctx context.Context, ns string) {
	for _, name := range r.Names() {
		if rem := r.remote(name); rem != nil && rem.Connected() && rem.MayUse(ns) {
			if _, err := rem.Namespace(ctx, ns); err != nil {
				logf.FromContext(ctx).V(1).Info("reading a worker namespace before placement", "worker", name, "error", err.Error())
			}
		}
	}
}

// reconcileWorker asks for a reconcile of the WorkerCluster worker.
func (r *Registry) reconcileWorker(worker string) {
	r.workerEvents <- event.GenericEvent{Object: &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: worker}}}
}

// backoff is the delay before the next probe after n consecutive failures.
func backoff(n int32) time.Duration {
	d := time.Second
	for i := int32(1); i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

func (r *Registry) replace(name string, rem *Connection) {
	r.mu.Lock()
	old := r.remotes[name]
	r.remotes[name] = rem
	r.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

func (r *Registry) Drop(name string) {
	r.mu.Lock()
	old := r.remotes[name]
	delete(r.remotes, name)
	r.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// remote returns the connection to a worker, nil when there is none.
func (r *Registry) remote(name string) *Connection {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.remotes[name]
}

// Conn is the connection to a worker as the Job controller uses it; nil
// when there is none.
func (r *Registry) Conn(name string) Conn {
	if rem := r.remote(name); rem != nil {
		return rem
	}
	return nil
}

// Names lists the workers the registry holds a connection for.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.remotes))
	for name := range r.remotes {
		out = append(out, name)
	}
	return out
}

func (r *Registry) Connected(name string) bool {
	rem := r.remote(name)
	return rem != nil && rem.Connected()
}

func (r *Registry) mirrorChanged(worker string, job *batchv1.Job) {
	if mirror.OtherManager(job, r.ManagerID) {
		// Another installation's, with the same origin: nothing of this
		// manager's, but the WorkerCluster says so.
		rem := r.remote(worker)
		if rem != nil && rem.sharedOrigin.CompareAndSwap(nil, &OriginConflict{Manager: job.Labels[v1alpha1.ManagerIDLabel],
			Job: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}}) {
			r.reconcileWorker(worker)
		}
		return
	}
	for _, h := range r.handlers() {
		if h.MirrorChanged != nil {
			h.MirrorChanged(worker, job)
		}
	}
}

func (r *Registry) capacityChanged(worker string) {
	for _, h := range r.handlers() {
		if h.CapacityChanged != nil {
			h.CapacityChanged(worker)
		}
	}
}

// WorkerReconciled tells the subscribers the WorkerCluster worker was
// looked at.
func (r *Registry) WorkerReconciled(worker string) {
	for _, h := range r.handlers() {
		if h.WorkerReconciled != nil {
			h.WorkerReconciled(worker)
		}
	}
}

// Requests are the WorkerClusters the pool asks its controller to look at:
// a worker's caches synced or stopped, another installation's mirror was
// seen there, or a request there was refused as forbidden.
func (r *Registry) Requests() <-chan event.GenericEvent { return r.workerEvents }

// PlacementsAffected tells the subscribers the Jobs placed on worker (and,
// when unplaced, those not placed) deserve a look.
func (r *Registry) PlacementsAffected(ctx context.Context, worker string, unplaced bool) {
	for _, h := range r.handlers() {
		if h.PlacementsAffected != nil {
			h.PlacementsAffected(ctx, worker, unplaced)
		}
	}
}

func (r *Registry) countJobs(ctx context.Context, worker string) (dispatched, running int32, err error) {
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.MatchingFields{managercache.UnfinishedPlacementIndex: worker}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, fmt.Errorf("listing unfinished manager Jobs placed on %s: %w", worker, err)
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		dispatched++
		if job.Status.Active > 0 {
			running++
		}
	}
	return dispatched, running, nil
}
