package jobs

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/managercache"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/mirror"
)

// hiddenMirror reads the metadata of the Job at key from the worker's API
// server and returns its identity if it is the recorded mirror (uid): one
// the cache does not show (readState asks only then), so one read per
// mirror lost, or per wait while it is being deleted.
func hiddenMirror(ctx context.Context, conn workers.MirrorReader, key types.NamespacedName, uid types.UID) (*batchv1.Job, error) {
	job, err := conn.UncachedJobMeta(ctx, key)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the Job at the mirror's name on the worker: %w", err)
	case job.UID != uid:
		return nil, nil
	}
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name, UID: job.UID, DeletionTimestamp: job.DeletionTimestamp}}, nil
}

// readState reads, from caches, what Next decides on: the Job (nil when
// gone), its worker's connection, WorkerCluster and mirror, and what this
// manager remembers of it. It reads in phases, each only when the ones
// before leave something to decide: whether the Job's state is jobferry's,
// what it records, its worker, its mirror, and whether a mirror may be made.
func (r *JobReconciler) readState(ctx context.Context, key types.NamespacedName, job *batchv1.Job, memo *stepMemo) (policy.State, error) {
	s := policy.State{Job: job, Now: r.Clock.Now(), Foreign: memo.foreign}
	if job == nil {
		return s, nil
	}
	sealKey, err := r.Keys.Key(ctx)
	if err != nil {
		return s, err
	}
	s.Blocked = map[policy.Write]bool{}
	for _, w := range policy.Writes() {
		if r.memory.refusals.blocked(job, w) {
			s.Blocked[w] = true
		}
	}
	if !readTrust(&s, sealKey) {
		if s.OverBudget != "" {
			return s, r.readOverBudget(ctx, &s, key, sealKey)
		}
		// Nothing more is read: nothing is decided from this state.
		return s, nil
	}
	unfinished := !policy.IsFinished(job) && !policy.NothingToRun(job)
	if err := r.readRecords(ctx, &s, key, sealKey, unfinished); err != nil {
		return s, err
	}
	if s.Worker == "" {
		if unfinished {
			_, refusal, err := r.admit(ctx, job)
			if err != nil {
				return s, err
			}
			if refusal == nil && heldToTheDispatchBudget(job, r.Queue != nil) {
				// Grown since its creation past what jobferry dispatches,
				// it would leave no room for what placement adds within
				// what the cache keeps of a Job.
				refusal = admission.OverDispatchBudget(job)
			}
			s.Refusal = refusalOf(refusal)
		}
		return s, nil
	}
	conn, err := r.readWorker(ctx, &s)
	if err != nil || conn == nil {
		return s, err
	}
	if err := r.readMirror(ctx, &s, key, conn, sealKey, unfinished); err != nil {
		return s, err
	}
	if !unfinished || s.WorkerCluster == nil || (s.Mirror != nil && !mirror.TemplateMutable(s.Mirror, true)) {
		return s, nil
	}
	return s, r.readAdmission(ctx, &s, conn)
}

// readTrust says whether the Job's jobferry state is one to decide from:
// not when the cache keeps the Job as its identity only (OverBudget), or
// its state is not what the manager sealed (Untrusted), or was written by
// an earlier manager without a seal (Legacy: sealed first).
func readTrust(s *policy.State, sealKey jobstate.Key) bool {
	if why, over := managercache.OverBudgetOf(s.Job); over {
		s.OverBudget = why
		return false
	}
	switch verdict, names := jobstate.Verify(s.Job, sealKey); verdict {
	case jobstate.Tampered:
		s.Untrusted = names
		return false
	case jobstate.Legacy:
		s.Legacy = true
		return false
	}
	return true
}

// heldToTheDispatchBudget: placement holds the Job to what jobferry
// dispatches (admission.OverDispatchBudget) before placing it: a Job never
// placed (no worker's directives in its template yet) and not queued in
// Kueue (whose admission check has its own flow for a Job that cannot be
// placed, and whose admission adds to the template). The budget webhook
// holds every Job to what the cache keeps of one.
func heldToTheDispatchBudget(job *batchv1.Job, kueueMode bool) bool {
	return jobstate.Attempt(job) == 0 && !(kueueMode && workload.QueueName(job) != "")
}

// readOverBudget reads, for a Job the cache keeps as its identity only,
// the one thing Next decides for it: whether a mirror of it runs, to be
// suspended. The Job is read whole from its API server (not kept) for its
// state alone, which names its worker and mirror; nothing else of it is
// read, and nothing when its state is not what jobferry wrote. The mirror
// is one jobferry made of the Job, of whichever attempt: the one recorded
// or this manager created, or one whose attempt seal verifies (made by an
// earlier leader, or of an attempt left behind on a worker that was
// away). One read a reconcile, which the Job's own changes, its mirror's
// and, while its worker is away, overBudgetRecheck bring.
func (r *JobReconciler) readOverBudget(ctx context.Context, s *policy.State, key types.NamespacedName, sealKey jobstate.Key) error {
	whole := &batchv1.Job{}
	if err := r.APIReader.Get(ctx, key, whole); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Job %s, over the cache's budget: %w", key, err)
	}
	if whole.UID != s.Job.UID || whole.DeletionTimestamp != nil || policy.IsFinished(whole) {
		return nil
	}
	switch verdict, _ := jobstate.Verify(whole, sealKey); verdict {
	case jobstate.Trusted, jobstate.Legacy:
		// Legacy state is only ever read as it is (and sealed so when
		// the Job is within its budget); a forged one names no other
		// Job's mirror, as a mirror names its Job by UID.
	default:
		return nil
	}
	s.Worker = whole.Annotations[v1alpha1.WorkerAnnotation]
	s.MirrorUID = types.UID(whole.Annotations[v1alpha1.MirrorUIDAnnotation])
	attempt, _ := r.memory.attempts.of(whole)
	s.CreatedMirrorUID = attempt.mirrorUID
	conn := r.conn(s.Worker)
	if s.Worker == "" || conn == nil || !conn.Connected() {
		return nil
	}
	s.Connection.Connected = true
	m, err := conn.Mirror(ctx, key)
	if err != nil || m == nil || !mirror.IsMirrorOf(m, r.Config.Origin, whole.UID) {
		return err
	}
	if m.UID != s.MirrorUID && m.UID != s.CreatedMirrorUID && !jobstate.AttemptSealed(sealKey.Secret, m) {
		// Someone's Job with the mirror's labels: not jobferry's to touch.
		return nil
	}
	if workers.IsOverBudget(m) {
		uid := m.UID
		if m, err = workers.WholeMirror(ctx, conn, r.Config.Origin, key); err != nil || m == nil || m.UID != uid {
			return err
		}
	}
	s.Mirror = m
	return nil
}

// readRecords reads what the Job records (its worker, queue, mirror UID)
// and what this manager remembers of its attempts, whether a later
// attempt's mirror or state exists out of its records, and its Workload.
func (r *JobReconciler) readRecords(ctx context.Context, s *policy.State, key types.NamespacedName, sealKey jobstate.Key, unfinished bool) error {
	job := s.Job
	s.KueueMode = r.Queue != nil
	s.RecordedQueue = job.Annotations[v1alpha1.QueuedAnnotation]
	s.WroteFinished = r.wroteFinished(job)
	s.Worker = job.Annotations[v1alpha1.WorkerAnnotation]
	s.MirrorUID = types.UID(job.Annotations[v1alpha1.MirrorUIDAnnotation])
	attempt, placedHere := r.memory.attempts.of(job)
	s.CreatedMirrorUID = attempt.mirrorUID
	// A leader that took over from one that died between creating a mirror
	// and recording its UID finds it unrecorded, of an attempt it did not
	// place itself: it takes the one it finds, as it does for Jobs placed
	// before the key (their managers recorded no UIDs). An attempt this
	// manager placed has no mirror but the one it creates.
	s.AdoptMirror = !placedHere
	var err error
	if highest := r.memory.highest.see(key, job.UID, jobstate.Attempt(job)); highest > jobstate.Attempt(job) && unfinished {
		// The cache may lag this manager's own write of the higher
		// attempt: the Job as its API server holds it has the last word.
		if s.RolledBackFrom, err = r.rolledBack(ctx, job, highest); err != nil {
			return err
		}
	}
	if unfinished {
		// Whatever the state says, on any worker it can see: a mirror of a
		// later attempt than it records means it is not the latest.
		if s.Stray, err = r.strayMirror(ctx, job, sealKey); err != nil {
			return err
		}
	}
	if r.Queue != nil && workload.QueueName(job) != "" && unfinished {
		v, err := r.Queue.View(ctx, job)
		if err != nil {
			return err
		}
		v = r.memory.checks.view(key, v)
		s.Queue = &v
	}
	return nil
}

// readWorker reads the Job's worker: its WorkerCluster and the manager's
// connection to it, returned when connected (nil otherwise).
func (r *JobReconciler) readWorker(ctx context.Context, s *policy.State) (workers.Conn, error) {
	if wc, err := r.workerCluster(ctx, s.Worker); err == nil {
		s.WorkerCluster = wc
	} else if apierrors.IsNotFound(err) {
		s.WorkerGoneSince = r.memory.removed.since(s.Worker, r.Clock.Now())
	} else {
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", s.Worker, err)
	}
	conn := r.conn(s.Worker)
	if conn == nil || !conn.Connected() {
		return nil, nil
	}
	s.Connection = policy.Connection{Connected: true, Namespaces: conn.AllowedNamespaces(), MayUse: conn.MayUse(s.Job.Namespace),
		StartedTemplatesMutable: mirror.StartedTemplatesMutable(parsedVersion(conn))}
	if missing := conn.MissingRights(); !workers.MayCreateMirrors(missing, s.Job.Namespace) {
		s.Connection.MirrorsForbidden = workers.MissingMessage(missing)
	}
	if v := conn.KubernetesVersion(); v != nil {
		s.Connection.KubernetesVersion = v.GitVersion
	}
	return conn, nil
}

// readMirror reads the Job's mirror on its worker (the cache's, whole when
// the cache keeps only its identity), tells it from another installation's
// Job of the name, and, when the cache shows none, whether the recorded one
// is still there out of its sight.
func (r *JobReconciler) readMirror(ctx context.Context, s *policy.State, key types.NamespacedName, conn workers.Conn, sealKey jobstate.Key, unfinished bool) error {
	job := s.Job
	m, err := conn.Mirror(ctx, key)
	if err != nil {
		return err
	}
	if m != nil && workers.IsOverBudget(m) && mirror.IsMirrorOf(m, r.Config.Origin, job.UID) && policy.OwnMirror(*s, m.UID) {
		// The mirror this manager created (or adopts, as Next does),
		// over what the worker's cache keeps of a Job: read whole from
		// the worker, kept by none. Any other Job the cache keeps so is
		// decided on from its identity and labels alone, as Next
		// does of a Job not its mirror.
		if m, err = workers.WholeMirror(ctx, conn, r.Config.Origin, key); err != nil {
			return err
		}
	}
	if m != nil && !mirror.IsMirrorOf(m, r.Config.Origin, job.UID) && !workers.MayDelete(m, r.Config.ManagerID, conn.OriginShared()) {
		// Another installation's mirror of the same name (or one that
		// may be): not ours to fence, so a Job not ours holds the name.
		s.Foreign, m = m, nil
	}
	if s.AdoptMirror && m != nil && m.UID != s.MirrorUID && m.UID != s.CreatedMirrorUID {
		// Only a mirror whose attempt this manager sealed is adopted (or,
		// for a Job older than the key, one its manager made unsealed): a
		// Job someone made with the mirror's labels, in the window after
		// a leader change, carries no such seal.
		s.AdoptMirror, s.AdoptWhy = adoptable(job, m, sealKey)
	}
	s.Mirror = m
	s.MirrorOverBudget = m != nil && workers.IsOverBudget(m)
	s.MirrorExpected = m == nil && r.mirrorExpected(job, s.Now)
	if m == nil && !s.MirrorExpected && s.MirrorUID != "" && unfinished {
		// Before the Job is taken to have lost its mirror: is the mirror
		// still there, out of the cache's sight?
		if s.HiddenMirror, err = hiddenMirror(ctx, conn, key, s.MirrorUID); err != nil {
			return err
		}
		s.MirrorFenced = s.HiddenMirror == nil && conn.DeletedMirrors().Recently(s.MirrorUID)
	}
	if m != nil && m.UID == s.MirrorUID {
		r.memory.attempts.forget(key)
	}
	s.MirrorChangeSeen = r.memory.observed.since(key)
	s.QuietCopying = r.memory.copies.quiet(s.Now, r.Config.StatusBatchPeriod)
	if m != nil && unfinished && s.Queue == nil && dispatch.PodsAtOnce(job) > dispatch.PodsAtOnce(m) {
		if s.GrowthRefused, err = r.growthRefused(ctx, job, m); err != nil {
			return err
		}
	}
	return nil
}

// readAdmission reads whether a mirror may be created, or a changed
// template carried to it: the dispatch policy, the manager namespace's
// admission of the pods, and the worker's.
func (r *JobReconciler) readAdmission(ctx context.Context, s *policy.State, conn workers.Conn) error {
	ns, refusal, err := r.admit(ctx, s.Job)
	if err != nil {
		return err
	}
	s.Refusal = refusalOf(refusal)
	if refusal == nil {
		// Remembered for the Job's generation: the placement's verdict
		// (carried across the placement's own write), unless the
		// template changed since.
		pods, err := r.admitPods(ctx, s.Job)
		if err != nil {
			return err
		}
		s.PodsRefused = pods.Refused
	}
	s.WorkerRejects, err = r.workerRejects(ctx, s.Job, ns, s.WorkerCluster, conn)
	return err
}

// refusalOf is the dispatch policy's refusal as Next reads it.
func refusalOf(r *admission.Refusal) *policy.Refusal {
	if r == nil {
		return nil
	}
	return &policy.Refusal{Rule: r.Rule, Message: r.Message}
}

// adoptable says whether m, a mirror of the Job's attempt whose UID nothing
// recorded, may be taken as the one jobferry created, and why.
func adoptable(job, m *batchv1.Job, key jobstate.Key) (bool, string) {
	switch {
	case jobstate.AttemptSealed(key.Secret, m):
		return true, "its attempt seal verifies: created by an earlier leader, which did not record it"
	case jobstate.PredatesKey(job, key):
		return true, "the Job predates the seal key: created by an earlier manager, which recorded no mirror UIDs"
	}
	return false, ""
}

// rolledBack returns highest when the Job as its API server holds it still
// records a lower attempt than this manager saw (0 when it does not, or
// the Job is gone or another).
func (r *JobReconciler) rolledBack(ctx context.Context, job *batchv1.Job, highest int) (int, error) {
	live := &batchv1.Job{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), live); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if live.UID != job.UID || jobstate.Attempt(live) >= highest {
		return 0, nil
	}
	return highest, nil
}

// wroteFinished: this manager wrote the Job's finished status (which the
// cache may not show yet).
func (r *JobReconciler) wroteFinished(job *batchv1.Job) bool {
	return r.memory.finished.has(job)
}

// strayMirror finds, on the connected workers, a mirror of the Job of a
// later attempt than the Job records that this manager did not just create:
// the Job's state does not account for it — it was removed, or rolled back
// to an earlier attempt's (saved and written back: its seal still matches).
// The mirrors are what says the attempt only grows: only jobferry creates
// a mirror of a new attempt, and always after recording it on the Job; and
// only one whose attempt it sealed (v1alpha1.AttemptSealLabel) counts, so a
// Job someone made with a mirror's labels holds nothing up.
func (r *JobReconciler) strayMirror(ctx context.Context, job *batchv1.Job, sealKey jobstate.Key) (*policy.StrayMirror, error) {
	key := client.ObjectKeyFromObject(job)
	recorded, recordedUID := jobstate.Attempt(job), types.UID(job.Annotations[v1alpha1.MirrorUIDAnnotation])
	for _, worker := range r.Workers.Names() {
		conn := r.conn(worker)
		if conn == nil || !conn.Connected() || !conn.MayUse(job.Namespace) {
			continue
		}
		m, err := conn.MirrorMeta(ctx, key)
		if err != nil {
			return nil, err
		}
		// The mirror the state records is the Job's, whatever a
		// worker-namespace user made of its attempt label.
		if m == nil || m.DeletionTimestamp != nil || m.UID == recordedUID || !mirror.IsMirrorOf(m, r.Config.Origin, job.UID) || mirror.Attempt(m) <= recorded ||
			!jobstate.AttemptSealed(sealKey.Secret, m) {
			continue
		}
		if created, ok := r.memory.attempts.of(job); ok && created.mirrorUID == m.UID {
			continue
		}
		// The manager cluster's cache may lag a write of the next attempt
		// (another replica's, before a leader change): the Job as its API
		// server holds it has the last word.
		live := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, key, live); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if live.UID != job.UID || jobstate.Attempt(live) >= mirror.Attempt(m) {
			return nil, nil
		}
		return &policy.StrayMirror{Worker: worker, Attempt: mirror.Attempt(m), UID: m.UID}, nil
	}
	return nil, nil
}

// mirrorExpectedFor is how long a mirror this manager created is trusted to
// exist though the worker's cache does not show it yet.
const mirrorExpectedFor = 30 * time.Second

// mirrorExpected: this manager created the mirror of the Job's current
// attempt less than mirrorExpectedFor ago.
func (r *JobReconciler) mirrorExpected(job *batchv1.Job, now time.Time) bool {
	rec, ok := r.memory.attempts.of(job)
	return ok && rec.mirrorUID != "" && now.Sub(rec.created) < mirrorExpectedFor
}

// admit reads the Job's namespace and applies the dispatch policy. The
// webhook applies it at creation; this catches Jobs created while it was
// down or not registered, namespaces changed since, and templates changed
// since (while suspended): it holds at every placement, mirror create and
// template carry, which is where readState asks.
func (r *JobReconciler) admit(ctx context.Context, job *batchv1.Job) (*corev1.Namespace, *admission.Refusal, error) {
	ns, err := r.namespaces().Get(ctx, job.Namespace)
	if err != nil {
		return nil, nil, err
	}
	_, refusal := r.Policy.Admit(job, ns)
	return ns, refusal, nil
}

// workerRejects says why the Job's worker may not run its pods as they are
// now ("" when it may): what placement checked that depends neither on free
// capacity nor on the worker taking new Jobs (dispatch.Admits), the worker's
// namespace included.
func (r *JobReconciler) workerRejects(ctx context.Context, job *batchv1.Job, ns *corev1.Namespace, wc *v1alpha1.WorkerCluster, conn workers.Conn) (string, error) {
	if !conn.MayUse(job.Namespace) {
		return "", nil // Next releases it, saying why
	}
	view := dispatch.Worker{Name: wc.Name, Labels: wc.Labels, Connected: true, Namespaces: wc.Spec.Namespaces, Directives: wc.Spec.Scheduling,
		Version: parsedVersion(conn), WorkerJobController: wc.Spec.JobController == v1alpha1.JobControllerWorker}
	if capacity := conn.Capacity(ctx); capacity != nil {
		view.Pools = capacity.Pools
		if view.Pools == nil {
			view.Pools = []v1alpha1.NodePool{}
		}
	}
	verdict, err := r.workerNamespaceVerdict(ctx, ns, conn, wc.Name, job.Namespace)
	if err != nil {
		return "", err
	}
	view.Namespace = verdict
	_, why := dispatch.Admits(job, view)
	return why, nil
}

// workerNamespaceVerdict says why the worker's namespace of the Job's name
// may not take its pods: someone else made it and did not accept this
// manager's Jobs in it, it enforces a weaker Pod Security level than the
// manager's namespace, it is missing and the manager may not create it, or
// the credential may not read it (the worker's rights are checked again at
// once). An error is one worth retrying.
func (r *JobReconciler) workerNamespaceVerdict(ctx context.Context, managerNS *corev1.Namespace, conn workers.Conn, worker, name string) (dispatch.NamespaceVerdict, error) {
	workerNS, err := conn.Namespace(ctx, name)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		r.Workers.RightsRefused(worker)
		return dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceUnreadable, Why: fmt.Sprintf("its credential may not read namespace %s there: %s (see the WorkerCluster's %s condition)",
			name, apiMessage(err), v1alpha1.ConditionAuthorized)}, nil
	case err != nil:
		return dispatch.NamespaceVerdict{}, err
	}
	// As the namespace will be when the mirror is written: jobferry creates
	// it, or brings the labels of one it created in step, first.
	rights := conn.NamespaceRights()
	plan := planWorkerNamespace(name, workerNS, podSecurityLabels(managerNS), r.Config.ManagerID, rights, slices.Contains(conn.AllowedNamespaces(), name))
	switch plan.action {
	case namespaceMissing:
		return dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceMissing, Why: fmt.Sprintf("namespace %s does not exist there, and the manager does not create namespaces there", name)}, nil
	case namespaceNotAccepted:
		return dispatch.NamespaceVerdict{Code: dispatch.ReasonNamespaceNotAccepted, Why: notAccepted(plan.namespace, r.Config.ManagerID)}, nil
	}
	why := r.Policy.WorkerNamespaceRejects(managerNS, plan.namespace)
	if why == "" {
		return dispatch.NamespaceVerdict{}, nil
	}
	if plan.ours && rights.Create && !rights.Relabel {
		why += fmt.Sprintf("; jobferry created it, but its credential there may not %s to bring its Pod Security labels in step with the manager's (the worker chart grants it with managerIdentity.allowNamespaceCreation)", workers.RelabelNamespacesRight)
	}
	return dispatch.NamespaceVerdict{Code: dispatch.ReasonPodSecurity, Why: why}, nil
}

// parsedVersion is the worker's Kubernetes version as placement compares
// it, nil while it is not known.
func parsedVersion(conn workers.ConnState) *version.Version {
	if v := conn.KubernetesVersion(); v != nil {
		return v.Parsed
	}
	return nil
}

// workerCluster reads the WorkerCluster name from the cache as the Job
// controller uses it: withoutCapacity, not a deep copy of the whole object.
func (r *JobReconciler) workerCluster(ctx context.Context, name string) (*v1alpha1.WorkerCluster, error) {
	cached := &v1alpha1.WorkerCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, cached, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return withoutCapacity(cached), nil
}

// admitPods asks the namespace whether it admits the Job's pods. Without a
// PodAdmitter (unit tests) the template is taken as admitted.
func (r *JobReconciler) admitPods(ctx context.Context, job *batchv1.Job) (tenantlimits.PodVerdict, error) {
	if r.PodAdmission == nil {
		return tenantlimits.PodVerdict{Admitted: tenantlimits.Admitted(job, &corev1.Pod{Spec: job.Spec.Template.Spec})}, nil
	}
	return r.PodAdmission.Admit(ctx, job)
}

// carryPodVerdict keeps the pods' verdict of job for written, the Job as
// jobferry's placement (or activation) wrote it, locked to job's version:
// its readAdmission before the mirror then takes the placement's verdict
// instead of a second dry-run. Only when the write changed the template by
// the worker's directives alone: a Job placed again after a release gets
// its user's recorded scheduling back, which the dry-run of job did not
// judge, and Carry compares the rest of the template with what was judged.
func (r *JobReconciler) carryPodVerdict(job, written *batchv1.Job) {
	if r.PodAdmission == nil || !policy.SchedulingAsUserWrote(job) {
		return
	}
	asJudged := written.DeepCopy()
	asJudged.Spec.Template = policy.WithScheduling(written.Spec.Template, policy.UserScheduling(written))
	r.PodAdmission.Carry(job, asJudged)
}

// growthRefused says why the Job's namespace's quota has no room for the
// pods its parallelism grew to since its mirror m was made ("" when there
// is, or the namespace has no quota).
func (r *JobReconciler) growthRefused(ctx context.Context, job, m *batchv1.Job) (string, error) {
	key, err := r.Keys.Key(ctx)
	if err != nil {
		return "", err
	}
	verdict, _ := jobstate.Verify(job, key)
	charge := sealedCharge(job, verdict == jobstate.Trusted)
	running := dispatch.PodsAtOnce(m)
	own := tenantlimits.Charged{QuotaCharge: charge, Pods: running}
	adding := tenantlimits.Charged{QuotaCharge: charge, Pods: dispatch.PodsAtOnce(job) - running}
	r.placing.mu.Lock()
	defer r.placing.mu.Unlock()
	refusal, err := r.quotaRefuses(ctx, job, adding, &own)
	if err != nil || refusal == nil {
		return "", err
	}
	return refusal.Message, nil
}

// withoutCapacity is a copy of a WorkerCluster but for the capacity and
// credential in its status, which the Job controller does not read (a
// worker's capacity comes from its connection): copying the capacity's
// pools with every reconcile of a placed Job was a tenth of what the
// manager allocated while it dispatched.
func withoutCapacity(wc *v1alpha1.WorkerCluster) *v1alpha1.WorkerCluster {
	return &v1alpha1.WorkerCluster{TypeMeta: wc.TypeMeta, ObjectMeta: *wc.ObjectMeta.DeepCopy(), Spec: *wc.Spec.DeepCopy(),
		Status: v1alpha1.WorkerClusterStatus{Conditions: slices.Clone(wc.Status.Conditions), DispatchedJobs: wc.Status.DispatchedJobs, RunningJobs: wc.Status.RunningJobs}}
}
