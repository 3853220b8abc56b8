package policy

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

// State is everything one reconcile knows about a manager Job, read from
// caches before anything is decided (Kueue's workload.go reads a workload's
// whole group the same way): Next decides from it alone.
type State struct {
	// Job is the manager Job; nil once it is gone.
	Job *batchv1.Job
	Now time.Time
	// Worker is the worker the Job is placed on ("" when unplaced).
	Worker string
	// WorkerCluster is that worker's object; nil when it no longer exists.
	WorkerCluster *v1alpha1.WorkerCluster
	// WorkerGoneSince is since when the WorkerCluster is known to be gone
	// (set only when it is).
	WorkerGoneSince time.Time
	// Connection is the manager's connection to Worker.
	Connection Connection
	// Mirror is this installation's Job of the same name on Worker, from the
	// worker's cache; nil when there is none (or the worker is down).
	Mirror *batchv1.Job
	// MirrorOverBudget: the worker's cache keeps Mirror as its identity
	// only (workers.IsOverBudget), and it was not read whole.
	MirrorOverBudget bool
	// Foreign is a same-named Job on Worker that jobferry did not create,
	// found when the worker refused the mirror as already existing.
	Foreign *batchv1.Job
	// HiddenMirror is the mirror jobferry recorded (MirrorUID), read from
	// the worker's API server because its cache shows none by that name:
	// still there, though no longer seen as jobferry's (its labels
	// changed, or its namespace holds more Jobs looking like jobferry's
	// than the cache keeps). Nil when the cache shows the mirror, or the
	// worker has no Job of that UID.
	HiddenMirror *batchv1.Job
	// MirrorFenced: this manager deleted the recorded mirror lately (as
	// HiddenMirror, say).
	MirrorFenced bool
	// MirrorChangeSeen is when the oldest change of the mirror not copied
	// yet was seen; zero when none is known.
	MirrorChangeSeen time.Time
	// QuietCopying: the manager wrote fewer than quietCopies status copies
	// in the last batch period (copyRate).
	QuietCopying bool
	// WroteFinished: this manager wrote the Job's finished status, which the
	// cache may not show yet.
	WroteFinished bool
	// MirrorExpected: this manager created the mirror of the Job's current
	// attempt moments ago, and the worker's cache does not show it yet.
	MirrorExpected bool
	// Refusal is why the dispatch policy keeps an unplaced Job on the
	// manager; nil when it may be dispatched.
	Refusal *Refusal
	// Blocked holds the Writes the API server rejected for the Job as it is
	// now (the reconciler looks up every one of Writes): no step that makes
	// one is chosen until the Job changes.
	Blocked map[Write]bool

	// Untrusted names jobferry's annotations on the Job when they do not
	// match their seal: state the manager did not write, or changed since
	// (jobstate.Verify). Nothing is done for such a Job.
	Untrusted []string
	// OverBudget says why the manager cluster's cache keeps the Job as its
	// identity only (managercache.OverBudget): it holds more than jobferry
	// keeps of one. Nothing is done for such a Job but its deletion and
	// suspending its mirror: of the rest of the State, only Worker,
	// Connection.Connected and Mirror are read, Mirror being a mirror
	// jobferry made of the Job, of any attempt (readOverBudget).
	OverBudget string
	// Legacy: state an earlier manager wrote without a seal, on a Job older
	// than the key: sealed as it is before anything else.
	Legacy bool
	// MirrorUID is the UID of the mirror jobferry created for the current
	// attempt, as recorded on the Job ("" until recorded).
	MirrorUID types.UID
	// CreatedMirrorUID is the UID of the mirror this manager created for
	// the current attempt moments ago (its memory), until it is recorded.
	CreatedMirrorUID types.UID
	// AdoptMirror: an unrecorded mirror of the current attempt is taken as
	// the one jobferry created: this manager did not place the attempt (a
	// leader that died between creating the mirror and recording its UID
	// did), and the mirror found is adoptable (its attempt seal verifies,
	// or the Job is older than the key, whose managers recorded no UIDs).
	AdoptMirror bool
	// AdoptWhy says why the unrecorded mirror found is adopted, for the log.
	AdoptWhy string
	// Stray is a mirror of this Job, on some worker, of a later attempt than
	// the Job records and not created by this manager: the state is not the
	// latest (removed, or an earlier one written back). Read for every
	// unfinished Job.
	Stray *StrayMirror
	// RolledBackFrom is the higher attempt this manager saw the Job's state
	// record before it recorded a lower one (an earlier state written back);
	// 0 when it did not.
	RolledBackFrom int
	// PodsRefused is the manager namespace's refusal of the Job's pods as
	// they are now (tenantlimits.PodAdmission): read before a mirror is
	// created or a changed template carried to it, "" when admitted.
	PodsRefused string
	// GrowthRefused says why the Job's namespace's quota has no room for
	// the pods its parallelism (or completions) grew to since its mirror
	// was made: read when it grew, "" when there is room.
	GrowthRefused string
	// WorkerRejects says why the Job's worker may not run its pods as they
	// are now (dispatch.Admits, the worker namespace's Pod Security, the
	// namespace's existence): read before a mirror is created or a changed
	// template carried to it, "" when it may.
	WorkerRejects string
	// KueueMode: the manager runs with Kueue (State.Queue may be set).
	KueueMode bool
	// RecordedQueue is the LocalQueue jobferry recorded, sealed, when it
	// first saw the Job queued (v1alpha1.QueuedAnnotation); "" when none.
	RecordedQueue string
	// Queue is the Job's Workload when Kueue queues it (it names a
	// LocalQueue and the manager runs with Kueue); nil otherwise. Kueue
	// then decides when the Job runs (it unsuspends and suspends it), and
	// jobferry where (queued.go).
	Queue *workload.View
}

// Refusal is the dispatch policy's refusal of a Job (admission.Refusal):
// the rule that refuses it and why.
type Refusal struct {
	Rule, Message string
}

// StrayMirror is a mirror found on a worker that the Job's state does not
// account for.
type StrayMirror struct {
	Worker  string
	Attempt int
	UID     types.UID
}

// Connection is what the manager knows of its connection to a worker.
type Connection struct {
	Connected bool
	// Namespaces, when set, are the only namespaces the credential may use.
	Namespaces []string
	// MayUse: the Job's namespace is one the manager may use there.
	MayUse bool
	// MirrorsForbidden says which rights the credential lacks to create the
	// Job's mirror in its namespace (workers.MayCreateMirrors), as the
	// last review found; "" when it has them.
	MirrorsForbidden string
	// StartedTemplatesMutable: the worker's API server lets a suspended
	// mirror that has started change its template's scheduling
	// (mirror.StartedTemplatesMutable of its version, KubernetesVersion:
	// "" while not known).
	StartedTemplatesMutable bool
	KubernetesVersion       string
}

// versionOrUnknown names a worker's Kubernetes version in a message.
func versionOrUnknown(v string) string {
	if v == "" {
		return "(its version not known yet)"
	}
	return v
}

// Config holds the settings Next applies.
type Config struct {
	Origin string
	// ManagerID identifies this installation on the workers.
	ManagerID string
	// WorkerLostTimeout: how long a worker may stay disconnected before its
	// unfinished Jobs are dispatched elsewhere.
	WorkerLostTimeout time.Duration
	// StatusBatchPeriod: how long a change of a running mirror may wait to
	// be copied with the ones after it. A final status is copied at once.
	StatusBatchPeriod time.Duration
	// DeleteFinishedMirrors deletes a finished mirror (and its pods, and
	// their logs) once its final status is copied. By default it stays on
	// the worker until the manager Job is deleted (by its user, its
	// ttlSecondsAfterFinished or its CronJob), as a Job submitted there
	// directly would stay: the clean-up costs the worker the same writes
	// either way, and the logs stay readable meanwhile.
	DeleteFinishedMirrors bool
}
