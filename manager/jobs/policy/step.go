package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/internal/jobstatus"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/mirror"
)

// OwnMirror: a Job of the Job's name and current attempt with UID uid on
// its worker is the mirror this manager created: the one whose UID it
// recorded, or, none recorded, the one it created or one it adopts
// (AdoptMirror).
func OwnMirror(s State, uid types.UID) bool {
	return uid == s.MirrorUID || (s.MirrorUID == "" && (uid == s.CreatedMirrorUID || s.AdoptMirror))
}

// Next decides what to do next for one manager Job, from what was read
// about it. It is pure: the reconciler reads, calls it, writes what it says,
// and asks again with what it wrote.
func Next(s State, cfg Config) Step {
	st := next(s, cfg)
	if blocked(s, st) {
		// The API server refused one of its writes for the Job as it is
		// (refusals are remembered per Write): not made again until the
		// Job changes, as the refusal's Event says.
		return Step{Kind: StepNone}
	}
	return st
}

// next is Next before refused writes are held back.
func next(s State, cfg Config) Step {
	job := s.Job
	if job == nil || job.DeletionTimestamp != nil {
		return Step{Kind: StepFinalize}
	}
	if s.OverBudget != "" {
		return overBudgetStep(s)
	}
	if len(s.Untrusted) > 0 {
		// Whatever the annotations say, they are not jobferry's decisions:
		// acting on them could run the Job where it may not run, or twice.
		if s.Blocked[NoticeUntrusted] {
			return Step{Kind: StepNone}
		}
		return Step{Kind: StepUntrusted, Why: fmt.Sprintf(
			"jobferry's state on this Job (annotations %s) was not written by jobferry's manager, or was changed since: "+
				"jobferry does not act on it (nothing is placed, created, updated or deleted for it on a worker, and no status is copied) "+
				"until what jobferry wrote is restored; delete the Job to stop it", strings.Join(s.Untrusted, ", "))}
	}
	if s.Legacy {
		return Step{Kind: StepRecord}
	}
	if s.Stray != nil {
		// Acting on state older than a mirror says could run the Job twice
		// (keeping an earlier attempt's mirror beside the later one).
		return strayStep(s, cfg)
	}
	if s.RolledBackFrom > 0 {
		// The later attempt's mirror may run on a worker out of sight.
		return rolledBackStep(s)
	}
	if s.Queue != nil && s.RecordedQueue == "" && !s.Blocked[WriteJob] {
		// Recorded before anything else: once seen queued, the Job is
		// dispatched only through Kueue, whatever happens to its label.
		return Step{Kind: StepRecord, RecordQueue: s.Queue.Queue}
	}
	if st, ok := nextLeftTheQueue(s); ok {
		return st
	}
	if s.Worker == "" {
		return nextUnplaced(s)
	}
	if !s.Connection.Connected {
		return nextWorkerDown(s, cfg)
	}
	m := s.Mirror
	if m != nil && (!mirror.IsMirrorOf(m, cfg.Origin, job.UID) || mirror.Attempt(m) < jobstate.Attempt(job)) {
		// A stale mirror: of an earlier manager Job of the same name (gone,
		// since names are unique), or of an earlier attempt of this one (the
		// worker was lost, came back and was chosen again). It is fenced:
		// deleted, its status never copied.
		if m.DeletionTimestamp != nil {
			return Step{Kind: StepNone, RequeueAfter: time.Second}
		}
		return Step{Kind: StepFence, Mirror: m, RequeueAfter: time.Second}
	}
	if m == nil && s.Queue != nil {
		if st, ok := nextQueuedWithoutMirror(s); ok {
			return st
		}
	}
	if m == nil {
		return nextWithoutMirror(s)
	}
	return nextWithMirror(s, cfg)
}

// overBudgetStep decides for a Job the cache keeps as its identity only
// (OverBudget): nothing is decided from what it says, so no change of it
// (its user's suspend, Kueue's preemption) would reach its mirror. A mirror
// of it that runs is suspended first, so a Job grown past its budget after
// it was placed cannot run on out of its queue's and its user's reach; it
// is resumed by the ordinary comparison of the Job's spec once the Job
// holds less again. While its worker is away the mirror cannot be looked
// at: the Job is looked at again every overBudgetRecheck.
func overBudgetStep(s State) Step {
	if m := s.Mirror; m != nil && m.DeletionTimestamp == nil && !jobstatus.Finished(m.Status) && !ptr.Deref(m.Spec.Suspend, false) {
		suspended := m.DeepCopy()
		suspended.Spec.Suspend = ptr.To(true)
		return Step{Kind: StepUpdateMirror, Mirror: suspended, Changed: []string{"suspend"}}
	}
	var recheck time.Duration
	if s.Worker != "" && !s.Connection.Connected {
		recheck = overBudgetRecheck
	}
	if s.Blocked[NoticeOverBudget] {
		return Step{Kind: StepNone, RequeueAfter: recheck}
	}
	return Step{Kind: StepOverBudget, RequeueAfter: recheck, Why: fmt.Sprintf(
		"this Job holds more than jobferry keeps of one: %s. jobferry does not act on it until it holds less: no change of it is carried to a worker and no status is copied, "+
			"and a mirror of it that runs is suspended (resumed once the Job holds less); delete the Job to stop it", s.OverBudget)}
}

// overBudgetRecheck is how often a Job over its budget whose worker is
// away is looked at again, for a mirror to suspend when the worker is back
// (nothing else brings it: the placement index leaves such a Job out).
const overBudgetRecheck = 30 * time.Second

// nextWithMirror decides for a Job whose worker shows a Job in its
// mirror's place, of its current attempt: recorded as its mirror, followed
// (its spec) and copied (its status) — or not its own.
func nextWithMirror(s State, cfg Config) Step {
	job, m := s.Job, s.Mirror
	if s.MirrorOverBudget && m.UID == s.MirrorUID {
		// Its identity only (readState reads the mirror whole, and did
		// not get it): nothing to compare or copy from; look again.
		return Step{Kind: StepNone, RequeueAfter: time.Second}
	}
	if m.UID != s.MirrorUID {
		if OwnMirror(s, m.UID) {
			return Step{Kind: StepRecord, MirrorUID: m.UID}
		}
		// Its labels are anyone's to write who may create Jobs in that
		// namespace; its UID is the worker's own.
		return Step{Kind: StepMirrorNotOurs, Why: fmt.Sprintf(
			"the Job %s/%s on %s carries this Job's mirror labels (attempt %d) but is not the mirror jobferry created (UID %s, not %s): "+
				"its status is not copied, and this Job is dispatched again as attempt %d",
			m.Namespace, m.Name, s.Worker, mirror.Attempt(m), m.UID, recordedOrNone(s.MirrorUID), jobstate.Attempt(job)+1)}
	}
	if Activates(s) {
		// Refused, the Job waits for a change: its suspension is
		// jobferry's hold, not its user's, and must not reach the mirror.
		return Step{Kind: StepActivate}
	}
	if !jobstatus.Finished(m.Status) && !IsFinished(job) && !s.Blocked[WriteMirrorSpec] {
		// A spec update held back leaves the status to copy.
		if st, ok := nextMirrorSpec(s, cfg); ok && !blocked(s, st) {
			return st
		}
	}
	desired := mirror.Status(job, m.Status)
	if over := cachebudget.JobStatusOver(&desired); over != nil {
		// Copied, the Job would be kept as its identity only and no
		// longer acted on: a Job controller writes no such status, only
		// whoever else may write the mirror's.
		if s.Blocked[NoticeOverBudget] {
			return Step{Kind: StepNone, RequeueAfter: time.Minute}
		}
		return Step{Kind: StepOverBudget, RequeueAfter: time.Minute, Why: fmt.Sprintf(
			"the status of its mirror on %s holds more than jobferry keeps of a Job's: %s; it is not copied", s.Worker, over)}
	}
	if !equality.Semantic.DeepEqual(desired, job.Status) {
		final := jobstatus.Finished(desired)
		if wait := batchWait(s, cfg); !final && wait > 0 {
			// Changes of a running mirror (pods created, ready) go out
			// together, like upstream's batched Job status updates.
			return Step{Kind: StepNone, RequeueAfter: wait}
		}
		return Step{Kind: StepCopyStatus, Status: desired, Final: final}
	}
	if jobstatus.Finished(m.Status) && IsFinished(job) && cfg.DeleteFinishedMirrors {
		return Step{Kind: StepDeleteMirror, Mirror: m, InSync: true}
	}
	if s.Queue != nil && drained(job, m) && !s.Queue.Admitted {
		return requeueStep(s, m)
	}
	return Step{Kind: StepNone, InSync: true}
}

// leftTheQueue: the manager runs with Kueue, the Job was seen queued, and
// it no longer names a LocalQueue (its label was removed: Kueue lets a
// suspended Job's be). Kueue no longer admits it, and jobferry never
// dispatches it outside Kueue.
func leftTheQueue(s State) bool {
	return s.KueueMode && s.RecordedQueue != "" && s.Queue == nil && !NothingToRun(s.Job)
}

// queueHolds: Kueue has not admitted the Job's pods as they would run if
// its mirror followed its spec now: it left the queue (Kueue ignores it,
// and could no longer evict it), or its Workload is not admitted or being
// evicted (Kueue keeps Admitted while it evicts). Its tenant's
// unsuspension or growth is then not carried to the mirror.
func queueHolds(s State) bool {
	return leftTheQueue(s) || (s.Queue != nil && (!s.Queue.Admitted || s.Queue.Evicted))
}

// heldBack is desired with what Kueue has not admitted left as the mirror
// m has it: suspended if m is, and no more pods at once than m runs.
func heldBack(desired, m *batchv1.Job) *batchv1.Job {
	out := &batchv1.Job{ObjectMeta: desired.ObjectMeta, Spec: desired.Spec}
	if ptr.Deref(m.Spec.Suspend, false) {
		out.Spec.Suspend = ptr.To(true)
	}
	if dispatch.PodsAtOnce(out) > dispatch.PodsAtOnce(m) {
		out.Spec.Parallelism, out.Spec.Completions = m.Spec.Parallelism, m.Spec.Completions
	}
	return out
}

// nextLeftTheQueue: a Job that left the queue waits for its label, unless
// its mirror runs already (Kueue admitted it before): that one goes on, its
// status copied, and is never unsuspended by jobferry (activates).
func nextLeftTheQueue(s State) (Step, bool) {
	if !leftTheQueue(s) || IsFinished(s.Job) || s.Mirror != nil || (s.Worker != "" && !s.Connection.Connected) {
		// A mirror that runs (or may: its worker is down) goes on as
		// any; it is never unsuspended or grown (queueHolds).
		return Step{}, false
	}
	return Step{Kind: StepShowWaiting, Waiting: Waiting{ReasonQueueLabelRemoved, fmt.Sprintf(
		"this Job was queued in Kueue's LocalQueue %s and its label %s was removed: Kueue no longer admits it, and jobferry dispatches it only through Kueue; "+
			"set the label again (%s=%s) to queue it", s.RecordedQueue, v1alpha1.KueueQueueNameLabel, v1alpha1.KueueQueueNameLabel, s.RecordedQueue)}}, true
}

// batchWait is how long the copy of a running mirror's change still waits.
// While the manager copies little (QuietCopying) a change goes at once, so
// a user sees it as soon as the worker shows it; once it copies many, each
// Job's change waits out the batch period from its first change, and the
// changes that follow within it go in the same write.
func batchWait(s State, cfg Config) time.Duration {
	if s.MirrorChangeSeen.IsZero() || s.QuietCopying {
		return 0
	}
	return cfg.StatusBatchPeriod - s.Now.Sub(s.MirrorChangeSeen)
}

func nextUnplaced(s State) Step {
	job := s.Job
	switch {
	case IsFinished(job):
		return Step{Kind: StepNone}
	case NothingToRun(job):
		if s.Blocked[WriteJob] {
			return Step{Kind: StepNone}
		}
		return Step{Kind: StepComplete}
	case s.Refusal != nil:
		// Looked at again in a minute: an administrator may opt the
		// namespace in meanwhile.
		return Step{Kind: StepNotAllowed, RequeueAfter: time.Minute, Waiting: Waiting{ReasonNotAllowed,
			fmt.Sprintf("jobferry does not dispatch this Job (rule: %s): %s", s.Refusal.Rule, s.Refusal.Message)}}
	case s.Queue == nil && UserSuspended(job):
		// A queued Job is suspended by Kueue, not by its user.
		return Step{Kind: StepShowWaiting, Waiting: UserSuspendedWaiting()}
	case s.Blocked[WritePlacement]:
		// The user was told; the same write would be rejected again.
		return Step{Kind: StepNone}
	case s.Queue != nil:
		return nextQueuedUnplaced(s)
	}
	return Step{Kind: StepPlace}
}

// strayStep: a mirror of the Job that its state does not account for runs
// on a worker (its state was removed or rolled back to an earlier
// attempt's; only a mirror whose attempt the manager sealed counts):
// placing it again, or acting on the earlier attempt, could run it twice.
func strayStep(s State, cfg Config) Step {
	if m := s.Mirror; m != nil && m.DeletionTimestamp == nil && mirror.IsMirrorOf(m, cfg.Origin, s.Job.UID) && mirror.Attempt(m) < s.Stray.Attempt {
		// The earlier attempt's mirror the state points at: jobferry
		// gave that attempt up when it dispatched the later one, so it
		// must not run beside it.
		return Step{Kind: StepFence, Mirror: m, RequeueAfter: time.Second, EventReason: ReasonStrayMirror, Why: fmt.Sprintf(
			"its mirror of attempt %d on %s was deleted: a mirror of a later attempt (%d, on %s) exists, so jobferry had given attempt %d up; jobferry's state on this Job was rolled back",
			mirror.Attempt(m), s.Worker, s.Stray.Attempt, s.Stray.Worker, mirror.Attempt(m))}
	}
	if s.Blocked[NoticeStray] {
		return Step{Kind: StepNone, RequeueAfter: 30 * time.Second}
	}
	return Step{Kind: StepStray, RequeueAfter: 30 * time.Second, Why: fmt.Sprintf(
		"a mirror of this Job (attempt %d, UID %s) exists on %s though the Job records attempt %d: jobferry's state on the Job was removed "+
			"or rolled back to an earlier attempt's; jobferry does not act on this Job "+
			"(nothing is placed, created, updated or deleted for it on a worker, and no status is copied) while that Job exists",
		s.Stray.Attempt, s.Stray.UID, s.Stray.Worker, jobstate.Attempt(s.Job))}
}

// rolledBackStep: the Job's state records a lower attempt than this
// manager saw it record: an earlier state written back. Its later attempt's
// mirror may run on a worker that is not connected; acting on the earlier
// state could run the Job twice.
func rolledBackStep(s State) Step {
	if s.Blocked[NoticeStray] {
		return Step{Kind: StepNone, RequeueAfter: 30 * time.Second}
	}
	return Step{Kind: StepStray, RequeueAfter: 30 * time.Second, EventReason: ReasonStateRolledBack, Why: fmt.Sprintf(
		"jobferry's state on this Job records attempt %d, but this manager saw it record attempt %d: an earlier state was written back; "+
			"jobferry does not act on this Job (nothing is placed, created, updated or deleted for it on a worker, and no status is copied): "+
			"attempt %d's mirror may still run; delete the Job to stop it",
		jobstate.Attempt(s.Job), s.RolledBackFrom, s.RolledBackFrom)}
}

// recordedOrNone names a recorded mirror UID for a message.
func recordedOrNone(uid types.UID) string {
	if uid == "" {
		return "none recorded"
	}
	return string(uid)
}

// nextMirrorSpec: the user changed the running manager Job's spec
// (parallelism, completions, deadline, suspend, ...; see mirror.SpecUpdate)
// and the mirror must follow.
func nextMirrorSpec(s State, cfg Config) (Step, bool) {
	// SpecUpdate compares the pod template only while the mirror's may
	// change; otherwise the manager Job's spec as it is will do, and the
	// mirror is not built on every status change.
	desired := &batchv1.Job{Spec: s.Job.Spec}
	// Compared as a v1.36 worker would take it: a change an older worker's
	// API server refuses is one to say, not one to drop (below).
	if mirror.TemplateMutable(s.Mirror, true) {
		if s.WorkerCluster == nil {
			return Step{}, false
		}
		var err error
		if desired, err = DesiredMirror(s.Job, Activates(s), s.WorkerCluster, cfg.Origin, cfg.ManagerID); err != nil {
			return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("cannot carry the new spec to the mirror on %s: %v", s.Worker, err)}, true
		}
	}
	if queueHolds(s) {
		desired = heldBack(desired, s.Mirror)
	}
	updated, changed := mirror.SpecUpdate(desired, s.Mirror, true)
	if len(changed) == 0 {
		return Step{}, false
	}
	if slices.Contains(changed, "template") && !mirror.TemplateMutable(s.Mirror, s.Connection.StartedTemplatesMutable) {
		// Resumed with the template it has, the mirror would run other
		// pods than the Job now asks for: it stays as it is, saying why.
		return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("the changed pod template is not carried to the mirror on %s: Kubernetes %s there lets the template of a Job that has started change only from v1.36 (feature gate MutableSchedulingDirectivesForSuspendedJobs); change it back, or delete the Job and create it again",
			s.Worker, versionOrUnknown(s.Connection.KubernetesVersion))}, true
	}
	if s.GrowthRefused != "" && (slices.Contains(changed, "parallelism") || slices.Contains(changed, "completions")) {
		return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("the Job's new parallelism is not carried to the mirror on %s: %s; lower it, or change the Job again once the quota has room",
			s.Worker, s.GrowthRefused)}, true
	}
	if slices.Contains(changed, "template") {
		// A suspended Job's template may change (KEP-2926): the policy, the
		// namespace's admission and the worker's pools judge the new one
		// before it reaches the worker.
		switch {
		case s.Refusal != nil:
			return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("the changed pod template is not carried to the mirror on %s: jobferry does not dispatch it (rule: %s): %s",
				s.Worker, s.Refusal.Rule, s.Refusal.Message)}, true
		case s.PodsRefused != "":
			return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("the changed pod template is not carried to the mirror on %s: namespace %s of this cluster does not admit its pods: %s",
				s.Worker, s.Job.Namespace, s.PodsRefused)}, true
		case s.WorkerRejects != "":
			return Step{Kind: StepInvalidMirror, Why: fmt.Sprintf("the changed pod template is not carried to the mirror on %s: %s", s.Worker, s.WorkerRejects)}, true
		}
	}
	return Step{Kind: StepUpdateMirror, Mirror: updated, Changed: changed}, true
}

// nextWorkerDown decides for a Job whose worker is not connected: nothing
// until the worker has been disconnected for WorkerLostTimeout (a transient
// blip must not rerun anything), then a re-dispatch with the next attempt —
// unless the Job asked to wait for its worker. The mirror left on the lost
// worker is fenced: its status is never read again, and the collector
// deletes it when the worker returns.
func nextWorkerDown(s State, cfg Config) Step {
	job := s.Job
	if IsFinished(job) {
		// Only the finished mirror is left to delete: the Job is looked at
		// again when its worker reconnects (workers.Pool).
		return Step{Kind: StepNone}
	}
	down, why := time.Duration(0), workerNotConnected
	cond := &metav1.Condition{}
	if s.WorkerCluster != nil {
		cond = meta.FindStatusCondition(s.WorkerCluster.Status.Conditions, v1alpha1.ConditionConnected)
	}
	switch {
	case s.WorkerCluster == nil:
		// Deleted: its mirrors may still run there, unseen.
		down, why = s.Now.Sub(s.WorkerGoneSince), "its WorkerCluster was deleted"
	case cond == nil || cond.Status == metav1.ConditionTrue:
		// Connected, or not yet judged: the connection comes back shortly.
	case cond.Reason != v1alpha1.ReasonUnreachable:
		// It answers (the credential is refused, the caches cannot sync,
		// the Secret is wrong): its mirrors may well run, so the Job waits
		// for the connection, however long, rather than run twice.
		if job.Status.StartTime == nil && job.Status.Active == 0 {
			return Step{Kind: StepShowWaiting, RequeueAfter: 10 * time.Second, Waiting: WaitingForMirror(ReasonWorkerNotConnected, s.Worker,
				"%s (%s: %s); the Job waits for the connection rather than run elsewhere, as its mirror may run there", workerNotConnected, cond.Reason, cond.Message)}
		}
		return Step{Kind: StepNone, RequeueAfter: 10 * time.Second}
	default:
		down = s.Now.Sub(cond.LastTransitionTime.Time)
	}
	if down < cfg.WorkerLostTimeout {
		requeue := min(cfg.WorkerLostTimeout-down+time.Second, 10*time.Second)
		if job.Status.StartTime == nil && job.Status.Active == 0 {
			// Placed, but nothing ran yet: say what it waits for.
			return Step{Kind: StepShowWaiting, RequeueAfter: requeue, Down: down, Waiting: WaitingForMirror(ReasonWorkerNotConnected, s.Worker,
				"%s; after %s it is placed elsewhere", why, cfg.WorkerLostTimeout)}
		}
		return Step{Kind: StepNone, RequeueAfter: requeue, Down: down}
	}
	if job.Annotations[v1alpha1.OnWorkerLostAnnotation] == v1alpha1.OnWorkerLostWait {
		return Step{Kind: StepWorkerLostWait, Down: down, RequeueAfter: time.Minute, Why: fmt.Sprintf(
			"worker %s has been unreachable for %s; this Job asks to wait for it (%s: %s) and is not run elsewhere",
			s.Worker, down.Round(time.Second), v1alpha1.OnWorkerLostAnnotation, v1alpha1.OnWorkerLostWait)}
	}
	return Step{Kind: StepRedispatch, Down: down, Why: fmt.Sprintf(
		"worker %s has been unreachable for %s; dispatching attempt %d elsewhere (the mirror left there is deleted when it returns)",
		s.Worker, down.Round(time.Second), jobstate.Attempt(job)+1)}
}

// DesiredMirror is the mirror of the manager Job as it is now, for the
// worker wc: what the mirror is created as and kept in step with. activate:
// the Job is held only to wait for placement (activates), so the mirror
// runs.
func DesiredMirror(job *batchv1.Job, activate bool, wc *v1alpha1.WorkerCluster, origin, manager string) (*batchv1.Job, error) {
	id := mirror.Identity{Origin: origin, UID: job.UID, Attempt: max(jobstate.Attempt(job), 1), Manager: manager}
	m, err := mirror.Build(jobstate.Without(job), id, wc.Spec.JobController, &wc.Spec.Scheduling)
	if err != nil {
		return nil, err
	}
	if raw, ok := job.Annotations[v1alpha1.AdmittedPodsAnnotation]; ok {
		// The pods run with what the manager namespace's admission gave
		// them (LimitRange defaults), as they would have there.
		var admitted v1alpha1.AdmittedPods
		if err := json.Unmarshal([]byte(raw), &admitted); err != nil {
			return nil, fmt.Errorf("reading annotation %s: %w", v1alpha1.AdmittedPodsAnnotation, err)
		}
		mirror.WithAdmitted(&m.Spec.Template.Spec, admitted)
	}
	if activate {
		m.Spec.Suspend = ptr.To(false)
	}
	return m, nil
}

// Activates: the Job is held by the webhook only to wait for placement, so
// jobferry unsuspends it once placed — unless Kueue queues it: then Kueue
// alone unsuspends it.
func Activates(s State) bool { return NeedsActivation(s.Job) && s.Queue == nil && !leftTheQueue(s) }

// blocked: a Write the step makes was refused for the Job as it is.
func blocked(s State, st Step) bool {
	return slices.ContainsFunc(Makes(st), func(w Write) bool { return s.Blocked[w] })
}
