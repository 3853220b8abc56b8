package inspection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
	"github.com/jobferry/jobferry/manager/inspection/workerread"
)

// request is what every handler establishes first: the caller within its
// rate, allowed to get the manager Job and to have the rights the core
// API would ask for what the handler shows of it (rights, in the Job's
// namespace); then the Job is read.
func (s *Server) request(w http.ResponseWriter, r *http.Request, who user.Info, rights []authorizationv1.ResourceAttributes) (*batchv1.Job, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("namespace %q: %v", ns, errs)))
		return nil, false
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("Job name %q: %v", name, errs)))
		return nil, false
	}
	if err := s.callers.admit(who.GetName()); err != nil {
		writeStatus(w, err)
		return nil, false
	}
	// Whether the caller may get the Job comes first: a Job they may not
	// read is Forbidden whether it exists or not.
	jobs := schema.GroupResource{Group: batchv1.GroupName, Resource: "jobs"}
	allowed, reason, err := s.access.allowed(r.Context(), who, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "get", Group: jobs.Group, Version: "v1", Resource: jobs.Resource, Name: name,
	})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return nil, false
	}
	if !allowed {
		writeStatus(w, apierrors.NewForbidden(jobs, name, errors.New(cannot(who, "get", jobs.Resource, jobs.Group, ns, reason))))
		return nil, false
	}
	for _, right := range rights {
		right.Namespace, right.Version = ns, "v1"
		allowed, reason, err := s.access.allowed(r.Context(), who, right)
		if err != nil {
			writeStatus(w, apierrors.NewInternalError(err))
			return nil, false
		}
		if !allowed {
			resource := right.Resource
			if right.Subresource != "" {
				resource += "/" + right.Subresource
			}
			msg := cannot(who, right.Verb, resource, "", ns, reason) +
				fmt.Sprintf(" (what an inspection shows of Job %s's pods takes the rights kubectl would need to be shown it: %s)", name, rightsList(rights))
			writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New(msg)))
			return nil, false
		}
	}
	job := &batchv1.Job{}
	if err := s.Reader.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			writeStatus(w, apierrors.NewNotFound(jobs, name))
		} else {
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("reading Job %s/%s: %w", ns, name, err)))
		}
		return nil, false
	}
	return job, true
}

// mirrorSide is the worker side of a manager Job as far as it could be
// read: the worker's client and the mirror, or the note saying why not.
type mirrorSide struct {
	placement placement
	worker    *workerread.Reader
	mirror    *batchv1.Job
	note      string
}

func (s *Server) mirrorSide(ctx context.Context, job *batchv1.Job) (mirrorSide, error) {
	key, err := s.Keys.Key(ctx)
	if err != nil {
		return mirrorSide{}, err
	}
	var m mirrorSide
	if m.placement, m.note = placementOf(job, key); m.note != "" {
		return m, nil
	}
	w := m.placement.worker
	if m.worker, err = s.workers(ctx, w); err != nil {
		if u := (unreachable{}); errors.As(err, &u) {
			m.note = u.Error()
			return m, nil
		}
		return m, err
	}
	mirror, err := m.worker.Mirror(ctx, job.Namespace, job.Name)
	switch {
	case apierrors.IsNotFound(err):
		m.note = noMirrorNote(job, w)
	case err != nil:
		m.note = fmt.Sprintf("reading the mirror on worker %s: %v", w, err)
	default:
		if m.note = notMirror(job, m.placement, mirror, s.Origin); m.note == "" {
			m.mirror = mirror
		}
	}
	return m, nil
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request, who user.Info) {
	job, ok := s.request(w, r, who, describeRights)
	if !ok {
		return
	}
	end, err := s.callers.beginDescribe()
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer end()
	// The worker's reads may wait on the inspections' rate limiter past
	// the server's read deadline, which must not cancel them (a GET has
	// no body); they have describeFor instead.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(r.Context(), describeFor)
	defer cancel()
	out := &inspectionv1alpha1.JobInspection{
		TypeMeta:   metav1.TypeMeta{Kind: inspectionv1alpha1.Kind, APIVersion: inspectionv1alpha1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name, UID: job.UID},
	}
	side, err := s.mirrorSide(ctx, job)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	out.Worker, out.Attempt, out.Notes.Mirror = side.placement.worker, side.placement.attempt, side.note
	if side.mirror == nil {
		writeInspection(w, out)
		return
	}
	out.Mirror = side.mirror
	pods, err := side.worker.Pods(ctx, side.mirror, s.Limits.MaxPods)
	switch {
	case err != nil:
		out.Notes.Pods = readRefused(out.Worker, "list the mirror's pods", err)
	case pods.Stopped:
		out.Notes.Pods = fmt.Sprintf("showing %d of the mirror's pods: %v", len(pods.Items), workerread.ErrReadBudget)
	case pods.More:
		out.Notes.Pods = fmt.Sprintf("showing %d of the mirror's pods: an inspection shows at most %d, found among the first %d pods on the worker labelled as the mirror's",
			len(pods.Items), s.Limits.MaxPods, workerread.MaxScanned(s.Limits.MaxPods))
	}
	out.Pods = pods.Items
	events, all, cut, err := side.worker.Events(ctx, job.Namespace, uidsOf(side.mirror, pods.Items), s.Limits.ScanEvents, s.Limits.MaxEvents)
	switch {
	case err != nil:
		out.Notes.Events = readRefused(out.Worker, "list Events", err)
	case !all:
		out.Notes.Events = fmt.Sprintf("not every Event of the namespace on the worker was read (at most %d, and within %d MiB with the pods)", s.Limits.ScanEvents, workerread.ReadBudget>>20)
	case cut:
		out.Notes.Events = fmt.Sprintf("showing the newest %d Events", s.Limits.MaxEvents)
	}
	out.Events = events
	writeInspection(w, out)
}

// writeInspection answers with out, its pods and Events encoded one at a
// time: the answer is never held whole a second time, encoded.
func writeInspection(w http.ResponseWriter, out *inspectionv1alpha1.JobInspection) {
	pods, events := out.Pods, out.Events
	head := *out
	head.Pods, head.Events = nil, nil
	b, err := json.Marshal(&head)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	// A caller that stops reading loses its answer; the deadline ends
	// with it (a later request on the connection has its own).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// head is a JSON object: its closing brace comes after the lists.
	_, err = w.Write(b[:len(b)-1])
	if err == nil {
		err = writeList(w, "pods", pods)
	}
	if err == nil {
		err = writeList(w, "events", events)
	}
	if err == nil {
		_, err = io.WriteString(w, "}\n")
	}
	if err != nil {
		// The caller went away: nothing is left to tell it.
		logf.Log.WithName("inspection").V(1).Info("the answer did not reach the caller", "error", err.Error())
	}
}

// writeList writes `,"name":[items]`, an item at a time.
func writeList[T any](w io.Writer, name string, items []T) error {
	if _, err := fmt.Fprintf(w, `,%q:[`, name); err != nil {
		return err
	}
	for i := range items {
		item, err := json.Marshal(&items[i])
		if err != nil {
			// Half an answer is sent: end it unfinished.
			panic(http.ErrAbortHandler)
		}
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if _, err := w.Write(item); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]")
	return err
}

// cannot says, in the API server's words, that who may not verb resource.
func cannot(who user.Info, verb, resource, group, ns, reason string) string {
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", who.GetName(), verb, resource, group, ns)
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}

// rightsList names rights as kubectl's auth can-i would: "get pods, list
// events".
func rightsList(rights []authorizationv1.ResourceAttributes) string {
	names := make([]string, len(rights))
	for i, r := range rights {
		names[i] = r.Verb + " " + r.Resource
		if r.Subresource != "" {
			names[i] += "/" + r.Subresource
		}
	}
	return strings.Join(names, ", ")
}

// readRefused explains a read of the worker that failed, naming the worker
// chart value that grants it when the worker refused the manager.
func readRefused(worker, what string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("worker %s does not let the manager's identity %s (install the worker chart with --set managerIdentity.allowInspection=true to grant it): %v", worker, what, err)
	}
	return fmt.Sprintf("%s on worker %s: %v", what, worker, err)
}
