package inspection

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
)

type fixedKey struct{ key jobstate.Key }

func (k fixedKey) Key(context.Context) (jobstate.Key, error) { return k.key, nil }

// rbac allows each user the gets it lists, as "namespace/name".
type rbac map[string][]string

func (r rbac) allowed(_ context.Context, u user.Info, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	if attrs.Verb != "get" || attrs.Group != "batch" || attrs.Resource != "jobs" {
		return false, "", nil
	}
	for _, may := range r[u.GetName()] {
		if may == attrs.Namespace+"/"+attrs.Name {
			return true, "", nil
		}
	}
	return false, "", nil
}

// The worker side of team/train: its mirror with two pods and their
// Events, beside a Job of someone else's with its own pod and Event.
func workerObjects() []runtime.Object {
	mirror := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "m-uid",
		Labels: map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "job-uid"}}}
	pod := func(name, uid, owner string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID(uid),
			Labels: map[string]string{batchv1.ControllerUidLabel: owner}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	event := func(name, uid, reason string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Reason: reason,
			InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}}
	}
	return []runtime.Object{mirror,
		pod("train-a", "pa", "m-uid", corev1.PodFailed), pod("train-b", "pb", "m-uid", corev1.PodRunning),
		pod("other-x", "px", "other-uid", corev1.PodRunning),
		event("e1", "m-uid", "SuccessfulCreate"), event("e2", "pa", "BackOff"), event("e3", "px", "Secret")}
}

func testServer(t *testing.T, access rbac, worker kubernetes.Interface) http.Handler {
	t.Helper()
	s := &Server{
		Reader: fake.NewClientBuilder().WithObjects(placedJob()).Build(), Origin: "jobferry", Keys: fixedKey{testKey},
		Limits: DefaultLimits, Clock: clocktesting.NewFakeClock(time.Now()),
	}
	// The front proxy's vouching, played by a header.
	s.authn = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if name := r.Header.Get("Test-User"); name != "" {
			return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
		}
		return nil, false, nil
	})
	s.access = access
	s.workers = func(_ context.Context, name string) (kubernetes.Interface, error) {
		if name != "worker-1" {
			t.Errorf("the server read worker %s", name)
		}
		return worker, nil
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
	h := testServer(t, rbac{"alice": {"team/train"}}, kubefake.NewClientset(workerObjects()...))
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
		strings.Join(pods, ",") != "train-a,train-b" || len(events) != 2 || strings.Contains(strings.Join(events, ","), "Secret") {
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
	h := testServer(t, rbac{"alice": {"team/train"}}, kubefake.NewClientset(objects...))
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
	h := testServer(t, rbac{"alice": {"team/train"}}, kubefake.NewClientset(workerObjects()...))
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
