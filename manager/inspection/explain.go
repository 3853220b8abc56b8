package inspection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
)

// Explainer says where a Job would go now (jobs.JobReconciler.Explain):
// placement's decision on this replica's views of the workers, and what
// would hold the Job before placement. A dispatch.InvalidJob error is the
// caller's (400); any other a failure of the manager's (500).
type Explainer interface {
	Explain(ctx context.Context, job *batchv1.Job, stored bool) (dispatch.Explanation, error)
}

// explainRights: a Job sent whole is explained to a caller who may create
// it, in the namespace of the request. Nothing is created, but the answer
// tells of the workers' namespaces of that name (whether they exist, admit
// the manager's Jobs, their Pod Security), which is the business of who may
// run Jobs there.
var explainRights = authorizationv1.ResourceAttributes{Verb: "create", Group: batchv1.GroupName, Version: "v1", Resource: "jobs"}

// maxSentObjects and maxSentValues bound the JSON objects, and all the
// values, of a Job sent whole: what it decodes into grows with them (an
// empty container decodes into a Go struct of about 400 bytes, an empty
// string into sixteen), far beyond its bytes. A Job of a hundred
// containers with a hundred variables each has about ten thousand objects.
// At the bounds a Job holds at most about 3.3 MiB once decoded, 20 MiB
// allocated while it is read (TestSentJobsDecodeWithinTheirBounds).
const (
	maxSentObjects = 10_000
	maxSentValues  = 100_000
)

// explainJob answers GET jobs/NAME/placement: where the stored Job would go
// now, to a caller who may get it.
func (s *Server) explainJob(w http.ResponseWriter, r *http.Request, who user.Info) {
	job, ok := s.request(w, r, who, nil)
	if !ok {
		return
	}
	end, err := s.callers.beginExplanation(who.GetName())
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer end()
	s.explain(w, r, job, true)
}

// explainSent answers POST placements: where the batch/v1 Job in the body,
// not created yet, would go now, to a caller who may create it. The body
// is read only once the caller is known to have the right and the replica
// has room for one more inspection, so what it holds is bounded by the
// inspections at once.
func (s *Server) explainSent(w http.ResponseWriter, r *http.Request, who user.Info) {
	ns := r.PathValue("namespace")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("namespace %q: %v", ns, errs)))
		return
	}
	if err := s.callers.admit(who.GetName()); err != nil {
		writeStatus(w, err)
		return
	}
	right := explainRights
	right.Namespace = ns
	allowed, reason, err := s.access.allowed(r.Context(), who, right)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	if !allowed {
		writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Group: batchv1.GroupName, Resource: "jobs"}, "",
			errors.New(cannot(who, "create", "jobs", batchv1.GroupName, ns, reason)+" (a placement is explained to who may create the Job)")))
		return
	}
	end, err := s.callers.beginExplanation(who.GetName())
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer end()
	job, err := sentJob(w, r, ns)
	if err != nil {
		writeStatus(w, err)
		return
	}
	s.explain(w, r, job, false)
}

// sentJob reads the request's body as one batch/v1 Job of namespace ns
// (its namespace may be left out), at most MaxPlacementRequestBytes,
// maxSentObjects objects and maxSentValues values, its quantities ones
// placement can compare.
func sentJob(w http.ResponseWriter, r *http.Request, ns string) (*batchv1.Job, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, inspectionv1alpha1.MaxPlacementRequestBytes))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("a Job to explain is at most %d bytes", tooLarge.Limit))
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the body: %v", err))
	}
	if err := scanSentJob(body); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.DisallowUnknownFields()
	job := &batchv1.Job{}
	if err := decoder.Decode(job); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a batch/v1 Job in JSON: %v", err))
	}
	if _, err := decoder.Token(); !errors.Is(err, io.EOF) {
		return nil, apierrors.NewBadRequest("the body holds more than one Job: explain one at a time")
	}
	if gvk := job.GroupVersionKind(); gvk != batchv1.SchemeGroupVersion.WithKind("Job") {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %q of %q, not a Job of batch/v1", gvk.Kind, gvk.GroupVersion()))
	}
	switch job.Namespace {
	case "":
		job.Namespace = ns
	case ns:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the Job's namespace %q is not the request's %q", job.Namespace, ns))
	}
	if job.Name == "" && job.GenerateName == "" {
		return nil, apierrors.NewBadRequest("the Job has neither a name nor a generateName")
	}
	for what, n := range map[string]*int32{"parallelism": job.Spec.Parallelism, "completions": job.Spec.Completions} {
		if n != nil && *n < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.%s %d: must be at least 0", what, *n))
		}
	}
	if err := boundedPod(&job.Spec.Template.Spec); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// What the manager trusts of a Job is sealed on it when it is placed; a
	// Job sent here is not, so its jobferry state is ignored, as a
	// tenant's Job's unsealed state is.
	job.UID, job.ResourceVersion, job.Status = "", "", batchv1.JobStatus{}
	return job, nil
}

// boundedPod refuses a pod template of more containers, or more or other
// resource names, than placement is bounded for.
func boundedPod(spec *corev1.PodSpec) error {
	for kind, containers := range map[string][]corev1.Container{"containers": spec.Containers, "initContainers": spec.InitContainers} {
		if len(containers) > maxSentContainers {
			return fmt.Errorf("spec.template.spec.%s: %d, more than the %d the manager explains", kind, len(containers), maxSentContainers)
		}
		for _, c := range containers {
			for list, resources := range map[string]corev1.ResourceList{"requests": c.Resources.Requests, "limits": c.Resources.Limits} {
				if len(resources) > maxSentResourceNames {
					return fmt.Errorf("container %q: %d resource %s, more than the %d the manager explains", c.Name, len(resources), list, maxSentResourceNames)
				}
				for name := range resources {
					if errs := validation.IsQualifiedName(string(name)); len(errs) > 0 {
						return fmt.Errorf("container %q: resource %s %q: %s", c.Name, list, name, strings.Join(errs, "; "))
					}
				}
			}
		}
	}
	if len(spec.EphemeralContainers) > 0 {
		return errors.New("spec.template.spec.ephemeralContainers: a pod template may not have any")
	}
	if len(spec.Overhead) > maxSentResourceNames {
		return fmt.Errorf("spec.template.spec.overhead: %d resource names, more than the %d the manager explains", len(spec.Overhead), maxSentResourceNames)
	}
	return nil
}

// quantityToken is a JSON value a resource.Quantity would be parsed from
// (after strings.TrimSpace, as it is parsed) whose number has more than 64
// digits and dots or an exponent of more than three digits: parsing or
// comparing one such takes seconds to hours (1e-2147483647; a million
// digits after the dot), and none is a request a node could hold.
var quantityToken = regexp.MustCompile(`^[+-]?(?:[0-9.]{65,}|[0-9.]*[eE][+-]?[0-9]{4,})`)

// The containers of a sent Job, and the resource names of each of its
// lists, are bounded too: summing a pod's requests copies the sum of its
// sidecars' at every init container (Kubernetes' PodRequests), so the
// work grows with their product.
const (
	maxSentContainers    = 64
	maxSentResourceNames = 32
)

// scanSentJob reads the body's JSON tokens before it is decoded: at most
// maxSentObjects objects and maxSentValues values, and no number a
// quantity would take minutes to parse or compare.
func scanSentJob(body []byte) error {
	tokens := json.NewDecoder(bytes.NewReader(body))
	tokens.UseNumber()
	objects, values := 0, 0
	for {
		token, err := tokens.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
		if values++; values > maxSentValues {
			return fmt.Errorf("the Job has more than %d JSON values: the manager explains Jobs up to that size", maxSentValues)
		}
		var value string
		switch t := token.(type) {
		case nil, json.Delim:
			// A null decodes into an empty struct as an object does.
			if t == nil || t == json.Delim('{') {
				if objects++; objects > maxSentObjects {
					return fmt.Errorf("the Job has more than %d JSON objects and nulls: the manager explains Jobs up to that size", maxSentObjects)
				}
			}
			continue
		case json.Number:
			value = t.String()
		case string:
			value = t
		default:
			continue
		}
		if quantityToken.MatchString(strings.TrimSpace(value)) {
			return fmt.Errorf("%.40q…: a number of more than 64 digits and dots or an exponent beyond 999, which no node could hold", value)
		}
	}
}

// explain answers with where job would go now.
func (s *Server) explain(w http.ResponseWriter, r *http.Request, job *batchv1.Job, stored bool) {
	if s.Explainer == nil {
		writeStatus(w, apierrors.NewServiceUnavailable("this manager does not explain placements (it runs without its Job controller)"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), describeFor)
	defer cancel()
	e, err := s.Explainer.Explain(ctx, job, stored)
	if invalid := (dispatch.InvalidJob{}); errors.As(err, &invalid) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("Job %s/%s: %v", job.Namespace, job.Name, invalid)))
		return
	}
	if err == nil {
		var notes []string
		if notes, err = s.notes(ctx, job, stored); err == nil {
			writeJSON(w, http.StatusOK, explanation(job, e, append(e.Notes, notes...)))
			return
		}
	}
	// The manager's own failure: its words (names of its identity, its
	// Secrets, webhooks) are for its log, not the caller.
	logf.Log.WithName("inspection").Error(err, "explaining a placement", "job", job.Namespace+"/"+job.Name, "stored", stored)
	writeStatus(w, apierrors.NewInternalError(errors.New("the manager could not explain the placement now (its log says why): try again shortly")))
}

// notes say what the answer could not take into account.
func (s *Server) notes(ctx context.Context, job *batchv1.Job, stored bool) ([]string, error) {
	var notes []string
	if stored {
		key, err := s.Keys.Key(ctx)
		if err != nil {
			return nil, err
		}
		// Where the Job is placed, as jobferry sealed it.
		p, _ := placementOf(job, key)
		switch {
		case !v1alpha1.IsManagerJob(job):
			notes = append(notes, fmt.Sprintf("jobferry does not dispatch this Job (its spec.managedBy is not %s: its namespace did not send it to jobferry when it was created): this is where it would go if it did", v1alpha1.ManagerManagedBy))
		case p.worker != "":
			notes = append(notes, fmt.Sprintf("the Job is placed on worker %s already: this is where it would go if it were placed again now (its own pods still counted there)", p.worker))
		}
	} else {
		notes = append(notes, "the Job is not created yet: whether its namespace admits its pods (LimitRange, webhooks) and its ResourceQuota has room is judged when it is")
	}
	if s.Leading != nil && !s.Leading() {
		notes = append(notes, "answered by a replica that does not lead: Jobs placed in the last seconds, which the workers' capacity summaries do not show yet, are not counted")
	}
	return notes, nil
}

// explanation is the API's form of e for job.
func explanation(job *batchv1.Job, e dispatch.Explanation, notes []string) *inspectionv1alpha1.PlacementExplanation {
	out := &inspectionv1alpha1.PlacementExplanation{
		TypeMeta:   metav1.TypeMeta{Kind: inspectionv1alpha1.PlacementKind, APIVersion: inspectionv1alpha1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name, GenerateName: job.GenerateName, UID: job.UID},
		Held:       e.Held, Worker: e.Worker, Pool: e.Pool, Reason: e.Why, Never: e.Never, Notes: notes,
	}
	for _, v := range e.Workers {
		out.Workers = append(out.Workers, inspectionv1alpha1.WorkerVerdict{Name: v.Name, Chosen: v.Chosen, Code: v.Code, Reason: v.Why, Change: v.Change})
	}
	return out
}
