package workercluster

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
)

// countsRefresh bounds how often a worker's status is rewritten for its Job
// counts (the DISPATCHED and RUNNING columns) while Jobs come and go.
const countsRefresh = 2 * time.Second

// rightsRetry is how often a worker whose credential lacks rights is checked
// again, so Jobs proceed within seconds of the rights being granted.
const rightsRetry = 3 * time.Second

// The rights the WorkerCluster controller uses on the manager cluster (the
// Job controller's: package jobs); the kubeconfig Secrets are read in the
// manager's namespace (cmd/manager).
// +kubebuilder:rbac:groups=jobferry.dev,resources=workerclusters,verbs=list;watch
// +kubebuilder:rbac:groups=jobferry.dev,resources=workerclusters/status,verbs=update

// Reconciler is the WorkerCluster controller: it keeps each worker's
// connection in the pool in step with its WorkerCluster and Secret, and
// writes what it finds in the WorkerCluster's status. One reconcile runs as
// phases over the worker (workerFacts: connect, authorize, origin, Warning
// Events watch, capacity, credential, Job counts), a pure decision
// (decideWorker) and one status write; then it tells the pool's subscribers
// what changed (PlacementsAffected, connected, reconciled).
type Reconciler struct {
	// Client reads WorkerClusters and their Secrets, watches the manager
	// Jobs (counted as they change, in tally), and writes WorkerCluster
	// status.
	Client client.Client
	// Pool holds the connections to the workers.
	Pool *workers.Pool
	// HealthInterval is how often a connected worker is probed.
	HealthInterval time.Duration

	// tally counts each worker's Jobs; made by SetupWithManager.
	tally *jobTally
}

// SetupWithManager registers the controller and the worker capacity
// metrics it serves from the pool.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := crmetrics.Registry.Register(workers.NewCapacityCollector(r.Pool, r.Pool.Leads)); err != nil {
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
	r.tally = newJobTally()
	inNamespace := predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetNamespace() == r.Pool.Namespace })
	return ctrl.NewControllerManagedBy(mgr).
		Named("workercluster").
		// Its own status writes must not reconcile it again: while a worker
		// is unreachable each probe changes the message (the failure count),
		// which would otherwise loop as fast as probes fail.
		For(&v1alpha1.WorkerCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, secretToWorkers, builder.WithPredicates(inNamespace)).
		Watches(&batchv1.Job{}, jobCountsHandler{reader: r.Client, tally: r.tally}).
		WatchesRawSource(source.Channel(r.Pool.Requests(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile computes the Connected condition of one WorkerCluster, keeping
// its connection in the pool in step with the Secret, and writes what
// changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wc := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, wc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pool.Drop(req.Name)
			metrics.ForgetWorker(req.Name)
			// Its Jobs start counting towards the worker-lost timeout.
			r.Pool.PlacementsAffected(ctx, req.Name, false)
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
	if d.status.KubernetesVersion != wc.Status.KubernetesVersion {
		logf.FromContext(ctx).Info("worker's Kubernetes version changed", "from", wc.Status.KubernetesVersion, "to", d.status.KubernetesVersion)
	}
	if facts.versionErrChanged && facts.versionErr != "" {
		logf.FromContext(ctx).Info("reading the worker's Kubernetes version failed; placement goes by the version last read", "version", d.status.KubernetesVersion, "error", facts.versionErr)
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
		r.Pool.PlacementsAffected(ctx, wc.Name, false)
	}
	if d.connectedNow {
		// Mirror events seen while the caches synced found the worker not
		// yet connected: look at its Jobs again, and at the unplaced ones,
		// which may fit now.
		r.Pool.PlacementsAffected(ctx, wc.Name, true)
		r.Pool.TellConnected(ctx, wc.Name)
	}
	// A change of the worker (uncordoned, relabelled, its rights or
	// connection back) may give waiting Jobs room; so may time, as this
	// runs with every health probe.
	r.Pool.WorkerReconciled(wc.Name)
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
	// version is the worker's Kubernetes version as the connection last
	// read it (nil: not known); versionErr why the last read failed,
	// versionErrChanged whether that is news.
	version           *workers.KubernetesVersion
	versionErr        string
	versionErrChanged bool
	// dispatched and running count the unfinished manager Jobs placed there.
	dispatched, running int32
}

// workerFacts runs the phases of a WorkerCluster reconcile that read (and,
// for the connection, rights review, Events watch and token renewal, act
// on) the worker, and returns what they found.
func (r *Reconciler) workerFacts(ctx context.Context, wc *v1alpha1.WorkerCluster) (workerFacts, error) {
	var f workerFacts
	var conn *workers.Connection
	f.connected, conn = r.Pool.Connect(ctx, wc)
	if conn != nil {
		f.hasConnection, f.probeFailures = true, conn.Failures()
		f.version = conn.KubernetesVersion()
		f.versionErr, f.versionErrChanged = conn.TakeVersionError()
		// Reviewed as soon as the worker answers: a credential that may
		// not list what the manager caches leaves it Connecting, and the
		// Authorized condition says why.
		if conn.Healthy() {
			authorized := r.Pool.ReviewRights(ctx, conn, conn.TakeReviewDue())
			f.authorized = &authorized
		}
		origin := originCondition(r.Pool.Origin, conn.OriginConflict())
		f.origin = &origin
		r.Pool.KeepWarningsWatch(ctx, conn)
		r.Pool.ReportOverBudget(ctx, wc, conn)
		// Kept in the status: a copy of the shared summary.
		f.capacity = conn.Capacity(ctx).DeepCopy()
		f.credential, f.credentialCondition, f.credentialAfter = r.Pool.KeepCredential(ctx, wc, conn)
	}
	counts := countsIn(r.tally, wc.Name)
	f.dispatched, f.running = counts.dispatched, counts.running
	return f, nil
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
	if f.hasConnection && f.version != nil {
		status.KubernetesVersion = f.version.GitVersion
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
	set(readyCondition(status.Conditions))
	d.status, d.write = *status, !equality.Semantic.DeepEqual(status, &wc.Status)
	wasConnected := meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionConnected)
	d.connectedNow, d.lost = d.connected && !wasConnected, !d.connected && wasConnected
	return d
}

// originCondition is the OriginExclusive condition, from the first mirror
// of another installation with the same origin seen (nil: none).
func originCondition(origin string, conflict *workers.OriginConflict) metav1.Condition {
	if conflict == nil {
		return metav1.Condition{Type: v1alpha1.ConditionOriginExclusive, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonOriginExclusive,
			Message: fmt.Sprintf("no mirror of another jobferry manager with origin %q seen on this worker", origin)}
	}
	return metav1.Condition{Type: v1alpha1.ConditionOriginExclusive, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonOriginShared,
		Message: fmt.Sprintf("another jobferry manager (%s %s) with the same origin %q made mirrors on this worker, such as %s: "+
			"give each manager its own origin (--origin, chart value origin); meanwhile this manager deletes none of them, nor any mirror there that does not say which manager made it",
			v1alpha1.ManagerIDLabel, conflict.Manager, origin, conflict.Job)}
}

// backoff is the delay before the next probe after n consecutive failures.
func backoff(n int32) time.Duration {
	d := time.Second
	for i := int32(1); i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}
