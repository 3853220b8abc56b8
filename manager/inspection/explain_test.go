package inspection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
)

// explainer records the Jobs it is asked about and answers with its
// answer, or err.
type explainer struct {
	asked  []*batchv1.Job
	stored []bool
	err    error
}

func (x *explainer) Explain(_ context.Context, job *batchv1.Job, stored bool) (dispatch.Explanation, error) {
	x.asked, x.stored = append(x.asked, job), append(x.stored, stored)
	if x.err != nil {
		return dispatch.Explanation{}, x.err
	}
	return dispatch.Explanation{Worker: "worker-2", Pool: "general", Why: "the freest", Workers: []dispatch.WorkerVerdict{
		{Name: "worker-1", Code: dispatch.ReasonCordoned, Why: "cordoned", Change: "uncordon it"},
		{Name: "worker-2", Chosen: true},
	}, Notes: []string{"queued by Kueue"}}, nil
}

func explainServer(t *testing.T, access rbac, x Explainer, leading bool) http.Handler {
	t.Helper()
	s := &Server{
		Reader: fake.NewClientBuilder().WithObjects(placedJob()).Build(), Origin: "jobferry", Keys: fixedKey{testKey},
		Limits: DefaultLimits, Clock: clocktesting.NewFakeClock(time.Now()), Explainer: x, Leading: func() bool { return leading },
	}
	s.authn = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if name := r.Header.Get("Test-User"); name != "" {
			return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
		}
		return nil, false, nil
	})
	s.access = access
	s.callers = newCallers(s.Limits, s.Clock)
	return s.Handler()
}

func post(t *testing.T, h http.Handler, who, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Test-User", who)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

const sentTrain = `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"train","uid":"forged","annotations":{"jobferry.dev/worker":"worker-1"}},
  "spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"busybox"}]}}},"status":{"active":3}}`

// A Job sent whole is explained to a caller who may create Jobs in the
// request's namespace, and only then is its body read; what it claims of
// itself that only jobferry or the API server writes is dropped.
func TestExplainingASentJob(t *testing.T) {
	path := inspectionv1alpha1.PlacementsPath("team")
	for name, tc := range map[string]struct {
		who, body string
		code      int
		says      string
	}{
		"a caller who may not create Jobs there": {"viewer", sentTrain, http.StatusForbidden,
			`User \"viewer\" cannot create resource \"jobs\" in API group \"batch\" in the namespace \"team\" (a placement is explained to who may create the Job)`},
		"a caller who may not create Jobs there, sending junk": {"viewer", "{", http.StatusForbidden, "cannot create"},
		"not JSON":          {"creator", "kind: Job", http.StatusBadRequest, "the body is not JSON"},
		"an unknown field":  {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"paralelism":2}}`, http.StatusBadRequest, `unknown field \"paralelism\"`},
		"not a Job":         {"creator", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`, http.StatusBadRequest, `a \"Pod\" of \"v1\", not a Job of batch/v1`},
		"two Jobs":          {"creator", sentTrain + sentTrain, http.StatusBadRequest, "more than one Job"},
		"another namespace": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x","namespace":"other"}}`, http.StatusBadRequest, `namespace \"other\" is not the request's \"team\"`},
		"no name":           {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{}}`, http.StatusBadRequest, "neither a name nor a generateName"},
		"an exponent that takes minutes": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1e-2147483647"}}}]}}}}`,
			http.StatusBadRequest, "an exponent beyond 999"},
		"a number of 70 digits": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"limits":{"memory":` + strings.Repeat("9", 70) + `}}}]}}}}`,
			http.StatusBadRequest, "more than 64 digits"},
		"too many values": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","args":[` + strings.Repeat(`"",`, maxSentValues) + `""]}]}}}}`,
			http.StatusBadRequest, "more than 100000 JSON values"},
		"an exponent behind a space": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":" 1e-21474836"}}}]}}}}`,
			http.StatusBadRequest, "an exponent beyond 999"},
		"a long fraction": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"0.` + strings.Repeat("7", 100_000) + `"}}}]}}}}`,
			http.StatusBadRequest, "more than 64 digits"},
		"too many nulls": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[` + strings.Repeat(`null,`, maxSentObjects) + `null]}}}}`,
			http.StatusBadRequest, "more than 10000 JSON objects and nulls"},
		"too many init containers": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"initContainers":[` + strings.Repeat(`{"name":"i"},`, maxSentContainers) + `{"name":"i"}]}}}}`,
			http.StatusBadRequest, "spec.template.spec.initContainers: 65, more than the 64"},
		"too many resource names": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"requests":{` + resourceNames(maxSentResourceNames+1) + `}}}]}}}}`,
			http.StatusBadRequest, "33 resource requests, more than the 32"},
		"a resource name that is none": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","resources":{"limits":{"a/b/c":"1"}}}]}}}}`,
			http.StatusBadRequest, `resource limits \"a/b/c\"`},
		"negative completions": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"completions":-1}}`, http.StatusBadRequest, "spec.completions -1: must be at least 0"},
		"too many objects": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[` + strings.Repeat(`{},`, maxSentObjects) + `{}]}}}}`,
			http.StatusBadRequest, "more than 10000 JSON objects"},
		"negative parallelism": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"parallelism":-5}}`, http.StatusBadRequest, "spec.parallelism -5: must be at least 0"},
		"too large": {"creator", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x","annotations":{"a":"` + strings.Repeat("x", inspectionv1alpha1.MaxPlacementRequestBytes) + `"}}}`,
			http.StatusRequestEntityTooLarge, "at most 3145728 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			x := &explainer{}
			code, body := post(t, explainServer(t, rbac{"creator": {"create jobs.batch team"}, "viewer": {"team/train"}}, x, true), tc.who, path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.says) || !strings.Contains(body, `"kind":"Status"`) {
				t.Errorf("POST as %s = %d %s; want %d saying %s", tc.who, code, body, tc.code, tc.says)
			}
			if len(x.asked) != 0 {
				t.Errorf("the manager explained a Job it refused")
			}
		})
	}

	x := &explainer{}
	code, body := post(t, explainServer(t, rbac{"creator": {"create jobs.batch team"}}, x, false), "creator", path, sentTrain)
	if code != http.StatusOK {
		t.Fatalf("POST as creator = %d %s", code, body)
	}
	if len(x.asked) != 1 || x.stored[0] {
		t.Fatalf("asked %d times, stored %v", len(x.asked), x.stored)
	}
	if job := x.asked[0]; job.Namespace != "team" || job.UID != "" || job.Status.Active != 0 || job.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("the Job explained: namespace %q, UID %q, active %d; want the request's namespace, no UID, no status", job.Namespace, job.UID, job.Status.Active)
	}
	var got inspectionv1alpha1.PlacementExplanation
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != inspectionv1alpha1.PlacementKind || got.Namespace != "team" || got.Name != "train" || got.Worker != "worker-2" || got.Pool != "general" ||
		len(got.Workers) != 2 || got.Workers[0].Code != dispatch.ReasonCordoned || got.Workers[0].Change != "uncordon it" || !got.Workers[1].Chosen {
		t.Errorf("the answer: %s", body)
	}
	notes := strings.Join(got.Notes, "\n")
	if !strings.Contains(notes, "queued by Kueue") || !strings.Contains(notes, "not created yet") || !strings.Contains(notes, "does not lead") || strings.Contains(notes, "placed on worker") {
		t.Errorf("notes of a sent Job, on a replica that does not lead: %q", notes)
	}
}

// A stored Job is explained to a caller who may get it, as the Job
// controller would place it again; an invalid Job is the caller's error,
// a failure to read the manager's.
func TestExplainingAStoredJob(t *testing.T) {
	path := inspectionv1alpha1.Path("team", "train", inspectionv1alpha1.PlacementSubresource)
	access := rbac{"alice": {"team/train"}}
	x := &explainer{}
	if code, body := get(t, explainServer(t, access, x, true), "mallory", path); code != http.StatusForbidden || !strings.Contains(body, `cannot get resource \"jobs\"`) || len(x.asked) != 0 {
		t.Errorf("mallory: %d %s (explained %d)", code, body, len(x.asked))
	}
	code, body := get(t, explainServer(t, access, x, true), "alice", path)
	if code != http.StatusOK || len(x.asked) != 1 || !x.stored[0] || x.asked[0].UID != "job-uid" {
		t.Fatalf("alice: %d %s (explained %d)", code, body, len(x.asked))
	}
	var got inspectionv1alpha1.PlacementExplanation
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != "job-uid" || !strings.Contains(strings.Join(got.Notes, "\n"), "placed on worker worker-1 already") || strings.Contains(strings.Join(got.Notes, "\n"), "does not lead") {
		t.Errorf("the answer for a placed Job on the leader: %s", body)
	}

	for name, tc := range map[string]struct {
		err  error
		code int
	}{
		"an invalid Job": {dispatch.InvalidJob{Err: errors.New("cluster selector: unexpected end")}, http.StatusBadRequest},
		"a failed read":  {errors.New("the cache is gone"), http.StatusInternalServerError},
		// The manager's own refusals are not the caller's.
		"a read the manager was refused": {apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no dry-run")), http.StatusInternalServerError},
		"no Job controller":              {nil, http.StatusServiceUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			var e Explainer = &explainer{err: tc.err}
			if tc.err == nil {
				e = nil
			}
			if code, body := get(t, explainServer(t, access, e, true), "alice", path); code != tc.code || !strings.Contains(body, `"kind":"Status"`) {
				t.Errorf("%d %s; want %d", code, body, tc.code)
			}
		})
	}
}

// What a Job at the bounds decodes into, measured (the threat model's
// figure): every object an empty container, or every value an empty
// argument.
func TestSentJobsDecodeWithinTheirBounds(t *testing.T) {
	for name, body := range map[string]string{
		"objects": `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"volumes":[` + strings.Repeat(`{},`, maxSentObjects-10) + `{}]}}}}`,
		"values":  `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"a","args":[` + strings.Repeat(`"",`, maxSentValues-50) + `""]}]}}}}`,
		"nulls":   `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"template":{"spec":{"volumes":[` + strings.Repeat(`null,`, maxSentObjects-10) + `null]}}}}`,
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		job, err := sentJob(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)), "team")
		// What stays is the Job: the body and the scan are garbage.
		runtime.GC()
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: a Job just within the bounds refused: %v", name, err)
		}
		inUse := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%s: a body of %d bytes holds %.1f MiB once decoded (%d MiB allocated)", name, len(body), float64(inUse)/(1<<20), (after.TotalAlloc-before.TotalAlloc)>>20)
		if inUse > 16<<20 {
			t.Errorf("%s: a Job within the bounds holds %d MiB once decoded, more than the 16 MiB the bounds are for", name, inUse>>20)
		}
		runtime.KeepAlive(job)
	}
}

// resourceNames is n JSON members "example.com/rI":"0".
func resourceNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(`"example.com/r%d":"0"`, i)
	}
	return strings.Join(names, ",")
}
