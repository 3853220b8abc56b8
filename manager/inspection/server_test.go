package inspection

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/inspection/workerread"
	"github.com/jobferry/jobferry/manager/inspection/workerread/workerreadtest"
	"github.com/jobferry/jobferry/manager/jobstate"
)

type fixedKey struct{ key jobstate.Key }

func (k fixedKey) Key(context.Context) (jobstate.Key, error) { return k.key, nil }

// rbac allows each user what it lists: get on a Job, as "namespace/name";
// a right in a namespace, as "verb resource[.group][/subresource] namespace".
type rbac map[string][]string

func (r rbac) allowed(_ context.Context, u user.Info, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	want := attrs.Namespace + "/" + attrs.Name
	if attrs.Group != "batch" || attrs.Resource != "jobs" || attrs.Verb != "get" {
		resource := attrs.Resource
		if attrs.Group != "" {
			resource += "." + attrs.Group
		}
		if attrs.Subresource != "" {
			resource += "/" + attrs.Subresource
		}
		want = attrs.Verb + " " + resource + " " + attrs.Namespace
		if attrs.Name != "" {
			return false, "", nil
		}
	}
	return slices.Contains(r[u.GetName()], want), "", nil
}

// viewer may get team/train and be shown its pods, Events and logs.
var viewer = []string{"team/train", "get pods team", "list events team", "get pods/log team"}

// The worker side of team/train: its mirror with two pods and their
// Events, beside a Job of someone else's with its own pod and Event.
func workerObjects() []runtime.Object {
	mirror := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "m-uid",
		Labels: map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "job-uid"}}}
	pod := func(name, uid, owner string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(uid),
			Labels:          map[string]string{batchv1.ControllerUidLabel: owner},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: types.UID(owner), Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	// A pod someone on the worker labelled as the mirror's, which the
	// mirror does not control.
	planted := pod("train-planted", "pp", "m-uid", corev1.PodRunning)
	planted.OwnerReferences = nil
	event := func(name, uid, reason string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Reason: reason,
			InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}}
	}
	return []runtime.Object{mirror,
		pod("train-a", "pa", "m-uid", corev1.PodFailed), pod("train-b", "pb", "m-uid", corev1.PodRunning),
		pod("other-x", "px", "other-uid", corev1.PodRunning), planted,
		event("e1", "m-uid", "SuccessfulCreate"), event("e2", "pa", "BackOff"), event("e3", "px", "Secret"), event("e4", "pp", "Planted")}
}

func testServer(t *testing.T, access rbac, worker kubernetes.Interface) http.Handler {
	t.Helper()
	return testServerWith(t, access, worker, DefaultLimits)
}

func testServerWith(t *testing.T, access rbac, worker kubernetes.Interface, limits Limits) http.Handler {
	t.Helper()
	s := &Server{
		Reader: fake.NewClientBuilder().WithObjects(placedJob()).Build(), Origin: "jobferry", Keys: fixedKey{testKey},
		Limits: limits, Clock: clocktesting.NewFakeClock(time.Now()),
	}
	// The front proxy's vouching, played by a header.
	s.authn = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if name := r.Header.Get("Test-User"); name != "" {
			return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
		}
		return nil, false, nil
	})
	s.access = access
	s.workers = func(_ context.Context, name string) (*workerread.Reader, error) {
		if name != "worker-1" {
			t.Errorf("the server read worker %s", name)
		}
		return workerreadtest.Reader(worker), nil
	}
	s.callers = newCallers(s.Limits, s.Clock)
	return s.Handler()
}

func get(t *testing.T, h http.Handler, who, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if who != "" {
		req.Header.Set("Test-User", who)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestOnlyAUserWhoMayGetTheJobSeesItsWorkerSide(t *testing.T) {
	h := testServer(t, rbac{"alice": viewer, "bob": {"team/train"}, "carol": {"team/train", "get pods team"},
		"carol2": {"team/train", "get pods team", "list events team"}}, kubefake.NewClientset(workerObjects()...))
	path := inspectionv1alpha1.Path("team", "train", "")
	for name, tc := range map[string]struct {
		who, path string
		code      int
		says      string
	}{
		"nobody the front proxy vouches for": {"", path, http.StatusUnauthorized, "front-proxy"},
		"a user who may not get the Job": {"mallory", path, http.StatusForbidden,
			`jobs.batch \"train\" is forbidden: User \"mallory\" cannot get resource \"jobs\" in API group \"batch\" in the namespace \"team\"`},
		"a Job that does not exist, to one who may not get it": {"alice", inspectionv1alpha1.Path("team", "gone", ""), http.StatusForbidden, "cannot get"},
		"a name that is no Job name":                           {"alice", "/apis/inspection.jobferry.dev/v1alpha1/namespaces/team/jobs/Train..x", http.StatusBadRequest, "Job name"},
		"a path of no resource":                                {"alice", "/apis/inspection.jobferry.dev/v1alpha1/namespaces/team/pods/train-a", http.StatusNotFound, ""},
		"logs of a pod that is not the mirror's": {"alice", inspectionv1alpha1.Path("team", "train", "log") + "?pod=other-x", http.StatusNotFound,
			`pod \"other-x\" is not a pod of the Job's mirror`},
		"logs of a pod labelled as the mirror's that the mirror does not control": {"alice", inspectionv1alpha1.Path("team", "train", "log") + "?pod=train-planted",
			http.StatusNotFound, `pod \"train-planted\" is not a pod of the Job's mirror`},
		// What kubectl describe and logs of the pods would need, the
		// inspection needs too.
		"describe by a user who may get the Job, not its pods": {"bob", path, http.StatusForbidden,
			`pods is forbidden: User \"bob\" cannot get resource \"pods\" in API group \"\" in the namespace \"team\"`},
		"describe by a user who may get the Job and its pods, not list Events": {"carol", path, http.StatusForbidden,
			`User \"carol\" cannot list resource \"events\" in API group \"\" in the namespace \"team\" (what an inspection shows of Job train's pods takes the rights kubectl would need to be shown it: get pods, list events)`},
		"logs by a user who may describe, not get pods/log": {"carol2", inspectionv1alpha1.Path("team", "train", "log"), http.StatusForbidden,
			`pods/log is forbidden: User \"carol2\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"team\"`},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := get(t, h, tc.who, tc.path)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("GET %s as %q = %d %s; want %d saying %s", tc.path, tc.who, code, body, tc.code, tc.says)
			}
			if code >= 400 && !strings.Contains(body, `"kind":"Status"`) {
				t.Errorf("the refusal is no Status: %s", body)
			}
		})
	}

	code, body := get(t, h, "alice", path)
	if code != http.StatusOK {
		t.Fatalf("alice's inspection: %d %s", code, body)
	}
	var in inspectionv1alpha1.JobInspection
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	var pods, events []string
	for _, p := range in.Pods {
		pods = append(pods, p.Name)
	}
	for _, e := range in.Events {
		events = append(events, e.Reason)
	}
	if in.Worker != "worker-1" || in.Attempt != "2" || in.Mirror == nil || in.Mirror.UID != "m-uid" ||
		strings.Join(pods, ",") != "train-a,train-b" || len(events) != 2 || strings.Contains(strings.Join(events, ","), "Secret") ||
		strings.Contains(strings.Join(events, ","), "Planted") {
		t.Errorf("alice sees worker %q attempt %q, mirror %v, pods %v, Events %v; want the mirror's two pods and Events only",
			in.Worker, in.Attempt, in.Mirror != nil, pods, events)
	}

	code, body = get(t, h, "alice", inspectionv1alpha1.Path("team", "train", "log")+"?pod=train-a")
	if code != http.StatusOK || !strings.Contains(body, "fake logs") {
		t.Errorf("alice's logs of train-a: %d %q", code, body)
	}
}

func TestAForgedMirrorIsNotShown(t *testing.T) {
	objects := workerObjects()
	// Someone on the worker made a Job with our labels in place of the
	// mirror: the manager recorded another UID.
	objects[0].(*batchv1.Job).UID = "forged"
	h := testServer(t, rbac{"alice": viewer}, kubefake.NewClientset(objects...))
	code, body := get(t, h, "alice", inspectionv1alpha1.Path("team", "train", ""))
	var in inspectionv1alpha1.JobInspection
	if err := json.Unmarshal([]byte(body), &in); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	if in.Mirror != nil || len(in.Pods) > 0 || !strings.Contains(in.Notes.Mirror, "not this Job's current mirror") {
		t.Errorf("a forged mirror was shown (mirror %v, pods %d, note %q)", in.Mirror != nil, len(in.Pods), in.Notes.Mirror)
	}
	if code, body := get(t, h, "alice", inspectionv1alpha1.Path("team", "train", "log")); code != http.StatusNotFound || strings.Contains(body, "fake logs") {
		t.Errorf("logs through a forged mirror: %d %s", code, body)
	}
}

func TestLogRequestsAreBounded(t *testing.T) {
	h := testServer(t, rbac{"alice": viewer}, kubefake.NewClientset(workerObjects()...))
	path := inspectionv1alpha1.Path("team", "train", "log")
	if code, body := get(t, h, "alice", path+"?limitBytes=4"); code != http.StatusOK || body != "fake" {
		t.Errorf("4 bytes of the log: %d %q", code, body)
	}
	var limited bool
	for range DefaultLimits.Burst + 1 {
		if code, _ := get(t, h, "alice", path); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Errorf("alice made %d log requests at once, none refused", DefaultLimits.Burst+1)
	}
}

// What a worker's users write into a pod (its env, its annotations) is not
// in an inspection: the answer's size is that of the pods as shown.
func TestAnInspectionShowsPodsSlim(t *testing.T) {
	objects := workerObjects()
	huge := strings.Repeat("x", 1<<20)
	for _, o := range objects {
		if p, ok := o.(*corev1.Pod); ok {
			p.Annotations = map[string]string{"a": huge}
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "E", Value: huge}}
			p.Status.Message = huge
		}
		if e, ok := o.(*corev1.Event); ok {
			e.Message = huge
		}
	}
	h := testServer(t, rbac{"alice": viewer}, kubefake.NewClientset(objects...))
	code, body := get(t, h, "alice", inspectionv1alpha1.Path("team", "train", ""))
	var in inspectionv1alpha1.JobInspection
	if err := json.Unmarshal([]byte(body), &in); err != nil || code != http.StatusOK {
		t.Fatalf("%d: %v", code, err)
	}
	if len(in.Pods) != 2 || len(in.Events) != 2 || len(body) > 2*workerread.MaxShownPodBytes+2*workerread.MaxShownEventBytes+4<<10 {
		t.Errorf("an inspection of 2 pods and 2 Events of 1 MiB each: %d pods, %d Events in %d bytes", len(in.Pods), len(in.Events), len(body))
	}
	if p := in.Pods[0]; p.Annotations != nil || p.Spec.Containers[0].Env != nil || len(p.Status.Message) != workerread.MaxMessage {
		t.Errorf("a pod shown keeps annotations %v, env %v, a message of %d bytes", p.Annotations != nil, p.Spec.Containers[0].Env != nil, len(p.Status.Message))
	}
	t.Logf("an inspection of 2 pods and 2 Events of 1 MiB each: %d bytes", len(body))
}

// A followed log of every pod takes a stream per container within what
// the caller has left, and says which it left out.
func TestAFollowedLogOfEveryPodIsCapped(t *testing.T) {
	limits := DefaultLimits
	limits.StreamsPerCaller = 1
	h := testServerWith(t, rbac{"alice": viewer}, kubefake.NewClientset(workerObjects()...), limits)
	code, body := get(t, h, "alice", inspectionv1alpha1.Path("team", "train", "log")+"?allPods=true&follow=true")
	want := "jobferry: following 1 of the 2 containers chosen: alice may have 1 log streams open at once, and the manager 512\n[pod/train-a/main] fake logs\n"
	if code != http.StatusOK || body != want {
		t.Errorf("a followed log of 2 pods with 1 stream left: %d %q, want %q", code, body, want)
	}
}

// A log line longer than the bound is cut there and marked; the next line
// comes whole.
func TestLongLogLinesAreCut(t *testing.T) {
	log := "short\r\n" + strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 64) + "\nlast"
	var lines []string
	if err := eachLine(strings.NewReader(log), 64, func(l string) bool { lines = append(lines, l); return true }); err != nil {
		t.Fatal(err)
	}
	want := []string{"short", strings.Repeat("x", 64) + " [jobferry: line cut at 64 bytes]", strings.Repeat("y", 64), "last"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
	lines = nil
	if err := eachLine(strings.NewReader("a\nb\nc\n"), 64, func(l string) bool { lines = append(lines, l); return len(lines) < 2 }); err != nil || len(lines) != 2 {
		t.Errorf("stopped after 2 lines: %q, %v", lines, err)
	}
}

// flushCounter counts the flushes of an answer (the timer's goroutine
// flushes, the test reads).
type flushCounter struct {
	*httptest.ResponseRecorder
	mu      sync.Mutex
	flushes int
	// deadlinesSet counts the write deadlines set (each a message to an
	// HTTP/2 connection's serving goroutine); deadline is the last one,
	// zero once lifted.
	deadlinesSet int
	deadline     time.Time
}

func (f *flushCounter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
}

func (f *flushCounter) SetWriteDeadline(d time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !d.IsZero() {
		f.deadlinesSet++
	}
	f.deadline = d
	return nil
}

func (f *flushCounter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushes
}

// Lines a log answer writes close together go to the caller in one flush
// (one frame through the aggregator), soon after they are written, not
// when the answer ends, under one write deadline lifted after the flush;
// every line is written.
func TestLogLinesAreFlushedTogether(t *testing.T) {
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	out := &logWriter{w: w, limit: 1 << 20, remaining: 1 << 20}
	const lines = 200
	for i := range lines {
		if !out.line(fmt.Sprintf("line %d", i)) {
			t.Fatalf("line %d refused", i)
		}
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.count() > 0, nil
	}); err != nil {
		t.Fatalf("the lines were never flushed while the answer went on: %v", err)
	}
	out.end()
	// Written within microseconds of each other: one flush, or two if the
	// flush fell between them.
	w.mu.Lock()
	flushes, deadlines, lifted := w.flushes, w.deadlinesSet, w.deadline.IsZero()
	w.mu.Unlock()
	if flushes > 2 || deadlines > 2 {
		t.Errorf("%d lines written at once took %d flushes and %d write deadlines, want at most 2 of each", lines, flushes, deadlines)
	}
	if deadlines == 0 || !lifted {
		t.Errorf("write deadlines: %d set, lifted after the flush: %v; want the window's writes under one, lifted while the log is quiet", deadlines, lifted)
	}
	if got := strings.Count(w.Body.String(), "\n"); got != lines {
		t.Errorf("%d lines in the answer, want %d", got, lines)
	}
}

// Before the manager has read how the API server authenticates to it,
// every request is answered 503 with the reason, not 401.
func TestUnavailableUntilTheFrontProxyIsRead(t *testing.T) {
	s := &Server{}
	why := errors.New("reading the front-proxy CA: configmaps is forbidden")
	s.unauthenticating.Store(&why)
	code, body := get(t, s.Handler(), "alice", inspectionv1alpha1.Path("team", "train", ""))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "configmaps is forbidden") {
		t.Errorf("before the front proxy is read: %d %s", code, body)
	}
}

// One connection holds no more of the server than its limits allow: a
// request whose headers are larger is refused (431), one whose headers do
// not all arrive in time is cut off, and an idle connection is closed.
func TestServerLimitsHoldPerConnection(t *testing.T) {
	s := &Server{}
	why := errors.New("not needed here")
	s.unauthenticating.Store(&why)
	limits := serverLimits{readHeader: 300 * time.Millisecond, read: time.Second, idle: 300 * time.Millisecond, maxHeaderBytes: 4 << 10}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := s.httpServer(t.Context(), limits)
	go server.Serve(listener)
	t.Cleanup(func() { server.Close() })
	addr := listener.Addr().String()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /apis HTTP/1.1\r\nHost: x\r\nX-Remote-Group: %s\r\n\r\n", strings.Repeat("g", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers of 64 KiB against a limit of 4 KiB: %v, %v", resp, err)
	}

	// closed says whether the server closed conn within the deadline
	// (a read ends with EOF, or any error but the deadline's own).
	closed := func(conn net.Conn, within time.Duration) bool {
		conn.SetReadDeadline(time.Now().Add(within))
		_, err := io.ReadAll(conn)
		var netErr net.Error
		return !(errors.As(err, &netErr) && netErr.Timeout())
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprint(slow, "GET /apis HTTP/1.1\r\nHost: x\r\n") // and never the rest
	if !closed(slow, 5*time.Second) {
		t.Error("a connection that never finished its headers was kept")
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "GET /apis HTTP/1.1\r\nHost: x\r\n\r\n")
	reader := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(reader, nil); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := reader.ReadByte(); err == nil {
		t.Error("the server sent more than its answer")
	} else if netErr, ok := err.(net.Error); ok && netErr.Timeout() {
		t.Error("an idle connection was kept past the idle limit")
	}
}
