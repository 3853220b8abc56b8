package warnings

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/metrics"
	"github.com/jobferry/jobferry/manager/workers"
)

// Forwarder records the workers' Warning Events about jobferry's mirrors
// and their pods on the manager Jobs (doc.go).
type Forwarder struct {
	// Client reads manager Jobs (the manager cluster's cache).
	Client client.Reader
	// Recorder records the forwarded Events on the manager Jobs.
	Recorder events.EventRecorder
	// Workers is the pool of connections: it tells the Forwarder of every
	// Warning Event on a worker, and reads mirrors and pods there.
	Workers Workers
	// Keys gives the key that seals jobferry's state on manager Jobs: only
	// a Job whose state verifies gets its mirror's Warnings.
	Keys jobstate.KeySource
	// Jobs is the manager cluster cache's Job informer: a deleted Job's
	// memory goes with it.
	Jobs  JobInformer
	Clock clock.PassiveClock

	warned   *warnedMemo
	warnings chan workers.Warning
}

// Workers is what the Forwarder uses of the pool of connections.
type Workers interface {
	Subscribe(workers.Handlers)
	Conn(worker string) workers.Conn
}

// JobInformer is the part of the manager's Job informer the Forwarder
// watches for deletions.
type JobInformer interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// warningBuffer is how many Warnings wait for the loop before the pool's
// watch waits for it.
const warningBuffer = 1024

// SetupWithManager subscribes the Forwarder to the pool's Warnings and to
// deletions of manager Jobs, and adds its loop, which runs on the leader
// (whose pool alone watches the workers' Events).
func (f *Forwarder) SetupWithManager(mgr manager.Manager) error {
	if err := f.init(); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(f.loop))
}

// init makes the Forwarder's memory and subscribes it.
func (f *Forwarder) init() error {
	f.Recorder = eventnote.Bound(f.Recorder)
	f.warned = newWarnedMemo(f.Clock)
	f.warnings = make(chan workers.Warning, warningBuffer)
	f.Workers.Subscribe(workers.Handlers{Warning: f.seen})
	_, err := f.Jobs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if job, ok := obj.(metav1.Object); ok {
			f.warned.forget(types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()})
		}
	}})
	if err != nil {
		return fmt.Errorf("watching manager Job deletions for the Warning forwarder: %w", err)
	}
	return nil
}

// seen passes a worker's Warning Event on to the forwarding loop,
// waiting rather than dropping one until ctx ends.
func (f *Forwarder) seen(ctx context.Context, w workers.Warning) {
	select {
	case f.warnings <- w:
	case <-ctx.Done():
	}
}

// loop forwards the workers' Warning Events, on the leader (whose
// pool alone connects to the workers).
func (f *Forwarder) loop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case w := <-f.warnings:
			if err := f.forwardWarning(ctx, w); err != nil {
				logf.FromContext(ctx).Error(err, "forwarding a worker's Warning Event", "worker", w.Worker,
					"event", w.Event.Namespace+"/"+w.Event.Name)
			}
		}
	}
}

// forwardWarning records a worker's Warning Event on the manager Job whose
// mirror (or a pod of it) it is about, the first time that pod or mirror
// has that reason.
func (f *Forwarder) forwardWarning(ctx context.Context, w workers.Warning) error {
	ev := w.Event
	conn := f.Workers.Conn(w.Worker)
	// Whoever created the Event had rights in its namespace, not in the
	// one it names: it may speak only of that namespace's objects.
	if conn == nil || !conn.Connected() || ev.Namespace == "" || ev.InvolvedObject.Namespace != ev.Namespace || !conn.MayUse(ev.Namespace) {
		return nil
	}
	var m *batchv1.Job
	switch ev.InvolvedObject.Kind {
	case "Pod":
		mirrors, err := candidateMirrors(ctx, conn, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name)
		if err != nil {
			return fmt.Errorf("finding the mirror of pod %s/%s on worker %s: %w", ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, w.Worker, err)
		}
		m = ownerMirror(ev.InvolvedObject.Name, mirrors)
	case "Job":
		found, err := conn.Mirror(ctx, types.NamespacedName{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name})
		if err != nil {
			return err
		}
		if found != nil && ev.InvolvedObject.UID == found.UID {
			m = found
		}
	}
	if m == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	job := &batchv1.Job{}
	if err := f.Client.Get(ctx, key, job); err != nil {
		return client.IgnoreNotFound(err)
	}
	sealKey, err := f.Keys.Key(ctx)
	if err != nil {
		return err
	}
	if verdict, _ := jobstate.Verify(job, sealKey); verdict != jobstate.Trusted || !currentAttempt(job, m, w.Worker) {
		return nil
	}
	if policy.IsFinished(job) {
		f.warned.forget(key)
		return nil
	}
	what := ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name + "/" + ev.Reason
	if f.warned.done(key, job.UID, what) {
		return nil
	}
	// A pod's Warning goes only once the pod is read and is the Event's and
	// the mirror's; forged ones spend none of the Job's Warnings, only the
	// pod reads of their own worker namespace, which are bounded (a Warning
	// over them goes if the worker reports it again, as the scheduler's do).
	if ev.InvolvedObject.Kind == "Pod" {
		if !f.warned.mayReadPod(w.Worker, ev.Namespace) {
			return nil
		}
		ours, err := mirrorsPod(ctx, conn, ev.InvolvedObject, m)
		if errors.Is(err, context.DeadlineExceeded) {
			f.warned.pausePodReads(w.Worker)
		}
		if !ours {
			return err
		}
	}
	switch f.warned.admit(key, job.UID, what) {
	case warningForward:
		f.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ev.Reason, warningAction(ev), "%s", forwardedNote(w.Worker, ev))
		metrics.WarningsForwarded.WithLabelValues(w.Worker, ev.InvolvedObject.Kind).Inc()
	case warningCapped:
		f.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonWorkerWarningsCapped, "Run",
			"worker %s reports more Warnings about this Job's mirror and pods than are recorded here (%d at most, one per %s): "+
				"the rest are on the worker (kubectl jobferry describe job shows them)", w.Worker, maxWarnedPerJob, warnedEvery)
	}
	return nil
}

// ReasonWorkerWarningsCapped: a Job got as many of its worker's Warnings
// as it may; the next ones are not recorded on it.
const ReasonWorkerWarningsCapped = "WorkerWarningsCapped"

// mirrorsPod reads the pod a Warning names (about) and says whether it is
// that Event's pod and mirror m's: the same UID (the name alone is anyone's
// to put in an Event), with m as its controller (a pod merely named or
// labelled like m's is not). A pod gone, or one the credential may not
// read, is not; only other errors are returned.
func mirrorsPod(ctx context.Context, conn workers.MirrorReader, about corev1.ObjectReference, m *batchv1.Job) (bool, error) {
	// Warnings are forwarded one at a time: a worker that does not answer
	// holds the others up for podReadTimeout, then its pod reads pause
	// (pausePodReads).
	ctx, cancel := context.WithTimeout(ctx, podReadTimeout)
	defer cancel()
	pod, err := conn.PodMeta(ctx, types.NamespacedName{Namespace: about.Namespace, Name: about.Name})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || errors.Is(err, workers.ErrMayNotReadPods):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading pod %s/%s, which a Warning names: %w", about.Namespace, about.Name, err)
	}
	return podOfMirror(pod, about, m), nil
}

// podOfMirror: pod is the one about names (its UID) and mirror m controls it.
func podOfMirror(pod *metav1.PartialObjectMetadata, about corev1.ObjectReference, m *batchv1.Job) bool {
	owner := metav1.GetControllerOfNoCopy(pod)
	return about.UID != "" && pod.UID == about.UID && owner != nil && owner.UID == m.UID && m.UID != ""
}

// candidateMirrors reads the mirrors that could own a pod of that name:
// those named as its name says (candidateMirrorNames), one cache read each;
// when the name may have been cut short, every mirror in the namespace.
func candidateMirrors(ctx context.Context, conn workers.MirrorReader, ns, pod string) ([]batchv1.Job, error) {
	names, cut := candidateMirrorNames(pod)
	if cut {
		return conn.Mirrors(ctx, ns)
	}
	var out []batchv1.Job
	for _, name := range names {
		m, err := conn.Mirror(ctx, types.NamespacedName{Namespace: ns, Name: name})
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, *m)
		}
	}
	return out, nil
}

// candidateMirrorNames are the names of the Jobs a pod of that name could
// belong to (see podNamedFor): "j" for "j-x7k2p", and also "j" for an
// Indexed Job's "j-3-x7k2p" besides "j-3". cut: the generated name reached
// its length limit, so the Job's name may be longer than what is left of it.
func candidateMirrorNames(pod string) (names []string, cut bool) {
	if len(pod) <= randomSuffixLength {
		return nil, false
	}
	base := pod[:len(pod)-randomSuffixLength]
	if len(base) >= maxGeneratedBase {
		return nil, true
	}
	job, ok := strings.CutSuffix(base, "-")
	if !ok || job == "" {
		return nil, false
	}
	names = append(names, job)
	if i := strings.LastIndexByte(job, '-'); i > 0 && strings.Trim(job[i+1:], "0123456789") == "" && i+1 < len(job) {
		names = append(names, job[:i])
	}
	return names, false
}

// currentAttempt: mirror m on worker is the mirror jobferry created for the
// manager Job's current attempt (a stale attempt left on a worker that came
// back is not, nor a Job someone made with its labels).
func currentAttempt(job, m *batchv1.Job, worker string) bool {
	return m.Labels[v1alpha1.OriginUIDLabel] == string(job.UID) &&
		job.Annotations[v1alpha1.WorkerAnnotation] == worker &&
		m.Labels[v1alpha1.DispatchAttemptLabel] == job.Annotations[v1alpha1.DispatchAttemptAnnotation] &&
		job.Annotations[v1alpha1.MirrorUIDAnnotation] == string(m.UID)
}

// forwardedNote says where the worker's Event happened and what it said:
// "worker worker-1, pod team-a/train-x7k2p: 0/2 nodes are available: ...".
func forwardedNote(worker string, ev *corev1.Event) string {
	object := "Job " + ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	if ev.InvolvedObject.Kind == "Pod" {
		object = "pod " + ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	}
	return eventnote.Cut(fmt.Sprintf("worker %s, %s: %s", worker, object, strings.TrimSpace(ev.Message)))
}

// warningAction is the action of the forwarded Event: the worker's, when
// its reporter said one (the scheduler says Scheduling), else Run.
func warningAction(ev *corev1.Event) string {
	if ev.Action != "" {
		return ev.Action
	}
	return "Run"
}

// randomSuffixLength and maxGeneratedBase are how the API server completes
// a generateName: the base cut to 58 characters, then 5 random ones
// (k8s.io/apiserver's SimpleNameGenerator).
const (
	randomSuffixLength = 5
	maxGeneratedBase   = 63 - randomSuffixLength
)

// ownerMirror returns the mirror a pod of that name belongs to. Both Job
// controllers name the pods of Job j "j-" plus 5 random characters, or, for
// an Indexed Job, "j-<index>-" plus 5; an Event names its pod, not the
// pod's owner, and the manager reads a pod only to confirm it
// (mirrorsPod), never to find one. When no mirror or more
// than one could own the pod (an Indexed Job a's pod a-1-x7k2p and a
// NonIndexed Job a-1's) it returns nil: a reason is not forwarded to a Job
// it may not be about.
func ownerMirror(pod string, mirrors []batchv1.Job) *batchv1.Job {
	var owner *batchv1.Job
	for i := range mirrors {
		if !podNamedFor(pod, &mirrors[i]) {
			continue
		}
		if owner != nil {
			return nil
		}
		owner = &mirrors[i]
	}
	return owner
}

// podNamedFor: a pod of Job j could have that name.
func podNamedFor(pod string, j *batchv1.Job) bool {
	if len(pod) <= randomSuffixLength || !lowerAlphanumeric(pod[len(pod)-randomSuffixLength:]) {
		return false
	}
	base := pod[:len(pod)-randomSuffixLength]
	prefix := j.Name + "-"
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
		return base == truncate(prefix, maxGeneratedBase)
	}
	if len(prefix) >= maxGeneratedBase {
		return base == prefix[:maxGeneratedBase]
	}
	rest, ok := strings.CutPrefix(base, prefix)
	if !ok {
		return false
	}
	// "<index>-", or the index cut short with the base.
	index, dashed := strings.CutSuffix(rest, "-")
	if !dashed && len(base) < maxGeneratedBase {
		return false
	}
	return index != "" && strings.Trim(index, "0123456789") == ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func lowerAlphanumeric(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// warnedMemo remembers, per manager Job, which (object, reason) pairs were
// forwarded, so each is forwarded once, and bounds how many and how fast:
// what a worker reports is anyone's to write who may create Events or pods
// in the Job's worker namespace. An entry ends when the Job finishes or is
// deleted, or is replaced by a new Job of the same name. It lives in
// memory: a new leader forwards each pair at most once more.
type warnedMemo struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byJob map[types.NamespacedName]*warnedJob
	// podReads bound the pod reads that check pod Warnings, by worker
	// namespace: an Event names a pod of its own namespace only, so one
	// who forges them there spends that namespace's reads alone.
	podReads map[workerNamespace]*rate.Limiter
	// podReadsPaused: until when a worker's pod reads pause, one having
	// timed out.
	podReadsPaused map[string]time.Time
}

type workerNamespace struct{ worker, namespace string }

// The pod reads that check pod Warnings, per worker namespace: at most so
// many a second after a burst (one metadata GET each, by name), each
// within podReadTimeout; after one times out, none on that worker for
// podReadPause. At most maxPodReadLimiters limiters are kept beyond the
// full ones (a full one is as good as none).
const (
	podReadsPerSecond  = 10
	podReadsBurst      = 100
	podReadTimeout     = 5 * time.Second
	podReadPause       = 30 * time.Second
	maxPodReadLimiters = 1024
)

// maxWarnedPerJob and warnedEvery bound the worker Warnings recorded on one
// manager Job: so many in all, and one per period after a first burst.
const (
	maxWarnedPerJob = 32
	warnedEvery     = 5 * time.Second
	warnedBurst     = 8
)

type warnedJob struct {
	uid     types.UID
	keys    map[string]struct{}
	limiter *rate.Limiter
	capped  bool
}

func newWarnedMemo(clk clock.PassiveClock) *warnedMemo {
	return &warnedMemo{clock: clk, byJob: map[types.NamespacedName]*warnedJob{}, podReads: map[workerNamespace]*rate.Limiter{}, podReadsPaused: map[string]time.Time{}}
}

// job is the memory of Job key (of uid), made or made anew. Under m.mu.
func (m *warnedMemo) job(key types.NamespacedName, uid types.UID) *warnedJob {
	w, ok := m.byJob[key]
	if !ok || w.uid != uid {
		w = &warnedJob{uid: uid, keys: map[string]struct{}{}, limiter: rate.NewLimiter(rate.Every(warnedEvery), warnedBurst)}
		m.byJob[key] = w
	}
	return w
}

// warningDecision is what to do with one of a worker's Warnings.
type warningDecision int

const (
	// warningSkip: forwarded before, or over the Job's rate.
	warningSkip warningDecision = iota
	// warningForward: forward it.
	warningForward
	// warningCapped: the Job reached its cap; say so, once.
	warningCapped
)

// admit decides about the Warning what about Job key (of uid), and records
// it when it is forwarded. One over the rate is not recorded as forwarded:
// if the worker reports it again later, it may go then.
func (m *warnedMemo) admit(key types.NamespacedName, uid types.UID, what string) warningDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.job(key, uid)
	if _, seen := w.keys[what]; seen || w.capped {
		return warningSkip
	}
	if len(w.keys) >= maxWarnedPerJob {
		w.capped = true
		return warningCapped
	}
	if !w.limiter.AllowN(m.clock.Now(), 1) {
		return warningSkip
	}
	w.keys[what] = struct{}{}
	return warningForward
}

// done: admit would not forward what about Job key (of uid) now: it was
// forwarded before, the Job reached its cap, or it is over its rate. What
// would not be forwarded costs no pod read.
func (m *warnedMemo) done(key types.NamespacedName, uid types.UID, what string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.job(key, uid)
	_, seen := w.keys[what]
	return seen || w.capped || (len(w.keys) < maxWarnedPerJob && w.limiter.TokensAt(m.clock.Now()) < 1)
}

// mayReadPod: a pod Warning in namespace ns of worker may be checked now,
// within that namespace's rate of pod reads (podReadsPerSecond,
// podReadsBurst), the worker's reads not paused; anyone who may create
// Events in a worker namespace can name a mirror's pod in as many as they
// like.
func (m *warnedMemo) mayReadPod(worker, ns string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if now.Before(m.podReadsPaused[worker]) {
		return false
	}
	key := workerNamespace{worker, ns}
	l, ok := m.podReads[key]
	if !ok {
		if len(m.podReads) >= maxPodReadLimiters {
			for k, l := range m.podReads {
				if l.TokensAt(now) >= podReadsBurst {
					delete(m.podReads, k)
				}
			}
		}
		l = rate.NewLimiter(podReadsPerSecond, podReadsBurst)
		m.podReads[key] = l
	}
	return l.AllowN(now, 1)
}

// pausePodReads: a pod read on worker timed out; none there for
// podReadPause, so one worker that does not answer holds up the others'
// Warnings for one timeout only.
func (m *warnedMemo) pausePodReads(worker string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.podReadsPaused[worker] = m.clock.Now().Add(podReadPause)
}

func (m *warnedMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byJob, key)
}
