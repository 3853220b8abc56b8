package warnings

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/eventnote"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/jobstate/jobstatetest"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
)

func namedJob(name string, indexed bool) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
	if indexed {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	return j
}

func TestPodNamedFor(t *testing.T) {
	long := strings.Repeat("a", 60) // "aaa…a-" is cut to 58 characters
	cases := []struct {
		name    string
		pod     string
		job     batchv1.Job
		matches bool
	}{
		{"non-indexed", "train-x7k2p", namedJob("train", false), true},
		{"non-indexed, another Job's pod", "trains-x7k2p", namedJob("train", false), false},
		{"non-indexed, an index in the name is another Job's", "train-1-x7k2p", namedJob("train", false), false},
		{"suffix of upper case is no generated one", "train-X7K2P", namedJob("train", false), false},
		{"suffix too short", "train-x7k2", namedJob("train", false), false},
		{"name too short", "x7k2p", namedJob("train", false), false},
		{"indexed", "train-12-x7k2p", namedJob("train", true), true},
		{"indexed, no index", "train-x7k2p", namedJob("train", true), false},
		{"indexed, index not a number", "train-ab-x7k2p", namedJob("train", true), false},
		{"long non-indexed name cut to 58", long[:57] + "-x7k2p", namedJob(long, false), false},
		{"long non-indexed name cut to 58 (match)", long[:58] + "x7k2p", namedJob(long, false), true},
		{"long indexed name cut to 58", long[:58] + "x7k2p", namedJob(long, true), true},
		{"indexed, index cut short", strings.Repeat("b", 50) + "-1234567x7k2p", namedJob(strings.Repeat("b", 50), true), true},
		{"indexed, index not cut but no dash", strings.Repeat("b", 10) + "-12x7k2p", namedJob(strings.Repeat("b", 10), true), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := podNamedFor(c.pod, &c.job); got != c.matches {
				t.Errorf("podNamedFor(%q, Job %q) = %v, want %v", c.pod, c.job.Name, got, c.matches)
			}
		})
	}
}

func TestOwnerMirror(t *testing.T) {
	mirrors := []batchv1.Job{namedJob("a", true), namedJob("a-1", false), namedJob("train", false)}
	if got := ownerMirror("train-x7k2p", mirrors); got == nil || got.Name != "train" {
		t.Errorf("train-x7k2p: got %v, want train", got)
	}
	// Job a's pod of index 1, or Job a-1's pod: either could be, so neither.
	if got := ownerMirror("a-1-x7k2p", mirrors); got != nil {
		t.Errorf("a-1-x7k2p: got %s, want none (ambiguous)", got.Name)
	}
	if got := ownerMirror("a-2-x7k2p", mirrors); got == nil || got.Name != "a" {
		t.Errorf("a-2-x7k2p: got %v, want a", got)
	}
	if got := ownerMirror("other-x7k2p", mirrors); got != nil {
		t.Errorf("other-x7k2p: got %s, want none", got.Name)
	}
}

func TestCandidateMirrorNames(t *testing.T) {
	long := strings.Repeat("a", 58)
	cases := []struct {
		pod   string
		names []string
		cut   bool
	}{
		{"train-x7k2p", []string{"train"}, false},
		{"train-12-x7k2p", []string{"train-12", "train"}, false},
		{"a-b-x7k2p", []string{"a-b"}, false},
		{"-x7k2p", nil, false},
		{"x7k2p", nil, false},
		{long + "x7k2p", nil, true},
	}
	for _, c := range cases {
		names, cut := candidateMirrorNames(c.pod)
		if strings.Join(names, ",") != strings.Join(c.names, ",") || cut != c.cut {
			t.Errorf("candidateMirrorNames(%q) = %q, %v; want %q, %v", c.pod, names, cut, c.names, c.cut)
		}
	}
	// Every case of TestPodNamedFor that matches is found among the
	// candidates, or by the cut name's listing.
	for _, j := range []batchv1.Job{namedJob("train", false), namedJob("train", true), namedJob(strings.Repeat("b", 50), true)} {
		for _, pod := range []string{"train-x7k2p", "train-12-x7k2p", strings.Repeat("b", 50) + "-1234567x7k2p"} {
			if !podNamedFor(pod, &j) {
				continue
			}
			names, cut := candidateMirrorNames(pod)
			if !cut && !slices.Contains(names, j.Name) {
				t.Errorf("pod %s of Job %s: candidates %q miss the Job", pod, j.Name, names)
			}
		}
	}
}

func TestForwardedNote(t *testing.T) {
	ev := &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "train-x7k2p"},
		Message: "0/2 nodes are available: 2 node(s) had untolerated taint {pool: drained}. \n"}
	if got, want := forwardedNote("w1", ev), "worker w1, pod team-a/train-x7k2p: 0/2 nodes are available: 2 node(s) had untolerated taint {pool: drained}."; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	ev.InvolvedObject.Kind = "Job"
	ev.Message = strings.Repeat("é", 600)
	got := forwardedNote("w1", ev)
	if len(got) > eventnote.MaxBytes || !strings.HasPrefix(got, "worker w1, Job team-a/train-x7k2p: é") || !strings.HasSuffix(got, "...") {
		t.Errorf("a long note: %d bytes, %q…", len(got), got[:60])
	}
	if strings.ToValidUTF8(got, "?") != got {
		t.Errorf("the cut note is not valid UTF-8")
	}
}

// warningOf is a Warning Event on worker about a pod or Job in team-a.
func warningOf(worker, kind, name, reason, message string) workers.Warning {
	return workers.Warning{Worker: worker, Event: &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: name + "." + reason},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "team-a", Name: name},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: message,
	}}
}

// A dispatched Job's mirror pods that cannot be scheduled, or are evicted,
// and the mirror's own Warning: each reason of each pod reaches the manager
// Job once, naming the worker and the pod; Events about other Jobs' pods,
// about a stale attempt or after the Job finished do not.
func TestForwardWarning(t *testing.T) {
	h := newForwarderHarness(t)
	ctx := context.Background()
	forward := func(w workers.Warning) []string {
		t.Helper()
		if err := h.f.forwardWarning(ctx, w); err != nil {
			t.Fatal(err)
		}
		var out []string
		for {
			select {
			case e := <-h.recorder.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	mirrorUID, worker := h.mirror.UID, h.worker
	// The mirror's pods on the worker, as its Job controller makes them; and
	// one a worker-namespace user made with a name like theirs.
	pod := func(name string, controller types.UID) types.UID {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-of-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: controller, Controller: ptr.To(true)}}}}
		if err := worker.API.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p.UID
	}
	x7k2p, b4n9q, lookalike := pod("train-x7k2p", mirrorUID), pod("train-b4n9q", mirrorUID), pod("train-l00k5", "someone-elses")
	podWarning := func(name string, uid types.UID, reason, message string) workers.Warning {
		w := warningOf("w1", "Pod", name, reason, message)
		w.Event.InvolvedObject.UID = uid
		return w
	}
	want := "Warning FailedScheduling worker w1, pod team-a/train-x7k2p: 0/2 nodes are available: 2 node(s) had untolerated taint {pool: drained}."
	if got := forward(podWarning("train-x7k2p", x7k2p, "FailedScheduling", "0/2 nodes are available: 2 node(s) had untolerated taint {pool: drained}.")); len(got) != 1 || got[0] != want {
		t.Fatalf("a pod's FailedScheduling: recorded %q, want %q", got, want)
	}
	// The scheduler tries again and says so (the Event's count and message
	// change): not again, and the pod is not read again.
	reads := worker.PodReads.Load()
	if got := forward(podWarning("train-x7k2p", x7k2p, "FailedScheduling", "0/3 nodes are available")); len(got) != 0 {
		t.Errorf("the same reason of the same pod again: recorded %q", got)
	}
	if n := worker.PodReads.Load() - reads; n != 0 {
		t.Errorf("a Warning forwarded before cost %d pod reads", n)
	}
	// Forged ones spend none of the Job's Warnings: more of them than its
	// burst, and the pod's own next Warning still goes.
	for i := range warnedBurst + 2 {
		if got := forward(podWarning("train-x7k2p", "not-the-pods", fmt.Sprintf("Forged%d", i), "forged")); len(got) != 0 {
			t.Errorf("a forged Warning %d: recorded %q", i, got)
		}
	}
	// A worker-namespace user's Event naming the pod, without its UID or
	// with another: not recorded, and the pod's own Event of that reason
	// still is.
	for _, uid := range []types.UID{"", "not-the-pods"} {
		if got := forward(podWarning("train-x7k2p", uid, "Evicted", "forged, UID "+string(uid))); len(got) != 0 {
			t.Errorf("an Event naming the mirror's pod with UID %q: recorded %q", uid, got)
		}
	}
	if got := forward(podWarning("train-x7k2p", x7k2p, "Evicted", "The node was low on resource: memory.")); len(got) != 1 || !strings.HasPrefix(got[0], "Warning Evicted worker w1, pod team-a/train-x7k2p: ") {
		t.Errorf("another reason of the pod: recorded %q", got)
	}
	if got := forward(podWarning("train-b4n9q", b4n9q, "FailedScheduling", "0/2 nodes are available")); len(got) != 1 {
		t.Errorf("the reason of another pod of the Job: recorded %q", got)
	}
	jobWarning := func(uid types.UID, reason string) workers.Warning {
		w := warningOf("w1", "Job", "train", reason, "Job has reached the specified backoff limit")
		w.Event.InvolvedObject.UID = uid
		return w
	}
	if got := forward(jobWarning(mirrorUID, "BackoffLimitExceeded")); len(got) != 1 || !strings.HasPrefix(got[0], "Warning BackoffLimitExceeded worker w1, Job team-a/train: ") {
		t.Errorf("the mirror's own Warning: recorded %q", got)
	}
	// What a worker-namespace user may forge (issue 23 item 3).
	otherNamespace := warningOf("w1", "Pod", "train-q1w2e", "FailedScheduling", "forged in default about team-a")
	otherNamespace.Event.Namespace = "default"
	noNamespace := warningOf("w1", "Pod", "train-q1w2e", "FailedScheduling", "forged in default about no namespace")
	noNamespace.Event.Namespace, noNamespace.Event.InvolvedObject.Namespace = "default", ""
	for _, w := range []workers.Warning{
		warningOf("w1", "Pod", "other-x7k2p", "FailedScheduling", "a pod of no mirror"),
		podWarning("train-l00k5", lookalike, "FailedScheduling", "a pod named like the mirror's, not controlled by it"),
		podWarning("train-g0n3z", "uid-of-train-g0n3z", "FailedScheduling", "a pod that does not exist"),
		warningOf("w1", "Node", "node-1", "NodeNotReady", "not a pod"),
		warningOf("w2", "Pod", "train-x7k2p", "Failed", "a worker without a connection"),
		otherNamespace, noNamespace,
		jobWarning("", "DeadlineExceeded"),
		jobWarning("another-jobs-uid", "DeadlineExceeded"),
	} {
		if got := forward(w); len(got) != 0 {
			t.Errorf("%s %s: recorded %q", w.Event.InvolvedObject.Kind, w.Event.InvolvedObject.Name, got)
		}
	}
	// A credential that may not read pods: no pod's Warning is recorded
	// (the mirror's own still are).
	worker.PodsUnreadable = true
	if got := forward(podWarning("train-b4n9q", b4n9q, "BackOff", "Back-off restarting failed container")); len(got) != 0 {
		t.Errorf("a pod's Warning where the credential may not read pods: recorded %q", got)
	}
	if got := forward(jobWarning(mirrorUID, "FailedCreate")); len(got) != 1 {
		t.Errorf("the mirror's own Warning where the credential may not read pods: recorded %q", got)
	}
	worker.PodsUnreadable = false
	// A stale attempt: the Job was placed again since.
	job := h.job(t)
	job.Annotations[v1alpha1.DispatchAttemptAnnotation] = "2"
	if err := h.manager.Update(ctx, jobstate.Sealed(job, testKey)); err != nil {
		t.Fatal(err)
	}
	if got := forward(podWarning("train-x7k2p", x7k2p, "Failed", "from the old attempt")); len(got) != 0 {
		t.Errorf("a stale attempt's pod: recorded %q", got)
	}
	if h.f.warned.len() != 1 {
		t.Errorf("%d Jobs remembered, want 1", h.f.warned.len())
	}
	// Deleted: the Job's memory goes with its deletion.
	if err := h.manager.Delete(ctx, job); err != nil {
		t.Fatal(err)
	}
	h.jobs.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-a/train", Obj: job})
	if h.f.warned.len() != 0 {
		t.Errorf("the deleted Job's forwarded reasons are still remembered")
	}
}

func TestWarnedMemo(t *testing.T) {
	clk := clocktesting.NewFakeClock(policytest.Now)
	m := newWarnedMemo(clk)
	key := types.NamespacedName{Namespace: "team-a", Name: "train"}
	if m.admit(key, "uid-1", "Pod/p/FailedScheduling") != warningForward || m.admit(key, "uid-1", "Pod/p/FailedScheduling") != warningSkip {
		t.Error("the first time is forwarded, the second is not")
	}
	// A new Job of the same name starts afresh.
	if m.admit(key, "uid-2", "Pod/p/FailedScheduling") != warningForward {
		t.Error("a new Job of the same name inherited the old one's memory")
	}
	m.forget(key)
	if m.len() != 0 || m.admit(key, "uid-2", "Pod/p/FailedScheduling") != warningForward {
		t.Error("forget left the Job remembered")
	}
}

// A worker user who makes a pod name or reason per Event gets a burst
// through, then one per period, then nothing but one notice.
func TestWarnedMemoBounds(t *testing.T) {
	clk := clocktesting.NewFakeClock(policytest.Now)
	m := newWarnedMemo(clk)
	key := types.NamespacedName{Namespace: "team-a", Name: "train"}
	forwarded, capped := 0, 0
	admit := func(i int) {
		switch m.admit(key, "uid-1", fmt.Sprintf("Pod/train-%05d/Forged", i)) {
		case warningForward:
			forwarded++
		case warningCapped:
			capped++
		}
	}
	for i := range 100 {
		admit(i)
	}
	if forwarded != warnedBurst || capped != 0 {
		t.Errorf("a burst of 100: %d forwarded, %d capped; want the burst of %d", forwarded, capped, warnedBurst)
	}
	for i := range 1000 {
		clk.Step(warnedEvery)
		admit(100 + i)
	}
	if forwarded != maxWarnedPerJob || capped != 1 {
		t.Errorf("over time: %d forwarded, %d capped notices; want %d and 1", forwarded, capped, maxWarnedPerJob)
	}
	if n := len(m.byJob[key].keys); n != maxWarnedPerJob {
		t.Errorf("%d keys remembered, want at most %d", n, maxWarnedPerJob)
	}
}

// len is how many Jobs the memo holds, for tests.
func (m *warnedMemo) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byJob)
}

// The pod reads that check pod Warnings are bounded per worker namespace,
// whatever the Events name: a burst, then so many a second; another
// namespace's are its own; a worker whose read timed out gets none for a
// while.
func TestWarnedMemoBoundsPodReads(t *testing.T) {
	clk := clocktesting.NewFakeClock(policytest.Now)
	m := newWarnedMemo(clk)
	for i := range podReadsBurst {
		if !m.mayReadPod("w1", "team-a") {
			t.Fatalf("pod read %d of the burst refused", i+1)
		}
	}
	if m.mayReadPod("w1", "team-a") {
		t.Error("a pod read past the burst was allowed")
	}
	if !m.mayReadPod("w1", "team-b") || !m.mayReadPod("w2", "team-a") {
		t.Error("another namespace's pod read was refused")
	}
	clk.Step(time.Second)
	for i := range podReadsPerSecond {
		if !m.mayReadPod("w1", "team-a") {
			t.Fatalf("pod read %d a second later refused", i+1)
		}
	}
	if m.mayReadPod("w1", "team-a") {
		t.Error("more pod reads a second than the rate allowed")
	}
	m.pausePodReads("w2")
	if m.mayReadPod("w2", "team-c") {
		t.Error("a pod read on a worker whose read timed out was allowed at once")
	}
	clk.Step(podReadPause)
	if !m.mayReadPod("w2", "team-c") {
		t.Error("the worker's pod reads did not resume after the pause")
	}
}

// testKey seals the test Job's state (jobstatetest.Key hands it out).
var testKey = jobstate.Key{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: policytest.Now.Add(-24 * time.Hour)}

// jobInformer hands the handler the Forwarder adds to the test.
type jobInformer struct {
	handler toolscache.ResourceEventHandler
}

func (i *jobInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.handler = h
	return nil, nil
}

type forwarderHarness struct {
	f        *Forwarder
	manager  client.Client
	recorder *events.FakeRecorder
	jobs     *jobInformer
	worker   *workerstest.Conn
	mirror   *batchv1.Job
}

// newForwarderHarness is a Forwarder with manager Job team-a/train
// dispatched to worker w1 (attempt 1), its mirror running there.
func newForwarderHarness(t *testing.T) *forwarderHarness {
	t.Helper()
	job := policytest.Job(policytest.Placed, policytest.Running)
	job.Annotations[v1alpha1.MirrorUIDAnnotation] = "mirror-uid"
	m, err := policy.DesiredMirror(job, false, policytest.WorkerCluster(), policytest.Config.Origin, policytest.Config.ManagerID)
	if err != nil {
		t.Fatal(err)
	}
	m.UID = "mirror-uid"
	h := &forwarderHarness{recorder: events.NewFakeRecorder(100), jobs: &jobInformer{}, worker: workerstest.NewConn(policytest.Config.Origin, m), mirror: m}
	h.manager = fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(jobstate.Sealed(job, testKey)).Build()
	h.f = &Forwarder{Client: h.manager, Recorder: h.recorder, Workers: workerstest.NewPool(map[string]*workerstest.Conn{"w1": h.worker}),
		Keys: jobstatetest.Key(testKey), Jobs: h.jobs, Clock: clocktesting.NewFakeClock(policytest.Now)}
	if err := h.f.init(); err != nil {
		t.Fatal(err)
	}
	return h
}

// job reads the manager Job.
func (h *forwarderHarness) job(t *testing.T) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := h.manager.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "train"}, job); err != nil {
		t.Fatal(err)
	}
	return job
}
