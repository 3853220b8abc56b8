package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/managercache"
)

// Paths the webhook server serves; the webhook configurations point at them.
const (
	MutatePath   = "/mutate-batch-v1-job"
	ValidatePath = "/validate-batch-v1-job"
)

// RegisterWebhooks adds the opt-in (mutating) and validating webhooks to
// server. The validating one reads namespaces through cache (and api, for
// those the cache does not know yet) to apply the dispatch policy.
func RegisterWebhooks(server webhook.Server, decoder admission.Decoder, cache, api client.Reader, policy *DispatchPolicy) {
	server.Register(MutatePath, &webhook.Admission{Handler: &optIn{decoder: decoder}, LogConstructor: requestLogger})
	server.Register(ValidatePath, &webhook.Admission{Handler: &validator{decoder: decoder, namespaces: NamespaceReader{Cache: cache, API: api}, policy: policy}, LogConstructor: requestLogger})
}

// requestLogger is the logger a webhook request's handler gets: the
// webhook's own. controller-runtime's default adds six values of the
// request to it for every request, which zap encodes at once whether or not
// anything is logged: ~6 KB per request, a twentieth of what the manager
// allocated while 100,000 Jobs were created. The handlers log nothing; the
// responses they refuse with carry the rule and the object in the API
// server's answer and audit log.
func requestLogger(base logr.Logger, _ *admission.Request) logr.Logger {
	return base
}

// optIn runs on Job creation in namespaces labelled jobferry.dev/dispatch:
// enabled. It hands the Job to jobferry and holds it suspended until it is
// placed, remembering whether the user wanted it suspended.
type optIn struct{ decoder admission.Decoder }

func (h *optIn) Handle(_ context.Context, req admission.Request) admission.Response {
	job := &batchv1.Job{}
	if err := h.decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if strings.HasPrefix(req.Namespace, ReservedPrefix) {
		// Its registration leaves out the reserved namespaces by name; a
		// kube-* namespace it cannot name is left alone here, as they are.
		return admission.Allowed("reserved namespace")
	}
	mutated, changed := OptIn(job)
	if !changed {
		return admission.Allowed("not for jobferry")
	}
	return admission.Patched("", OptInPatch(job, mutated)...)
}

// OptInPatch is the JSON patch that takes job to OptIn's mutated Job: the
// three fields OptIn may set. Written out rather than found by diffing the
// Job's JSON before and after (admission.PatchResponseFromRaw): that
// marshalled the Job and decoded both documents again, about a tenth of
// the manager's CPU in a burst of creates.
func OptInPatch(job, mutated *batchv1.Job) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	// "add" sets a member whether or not it is there (RFC 6902, 4.1).
	set := func(path string, value any) {
		ops = append(ops, jsonpatch.NewOperation("add", path, value))
	}
	if by := ptr.Deref(mutated.Spec.ManagedBy, ""); by != ptr.Deref(job.Spec.ManagedBy, "") {
		set("/spec/managedBy", by)
	}
	if suspend := ptr.Deref(mutated.Spec.Suspend, false); job.Spec.Suspend == nil || suspend != *job.Spec.Suspend {
		set("/spec/suspend", suspend)
	}
	key := v1alpha1.HeldForPlacementAnnotation
	if value, ok := mutated.Annotations[key]; ok && job.Annotations[key] != value {
		// An empty map may be absent from the JSON (omitempty) or there
		// as {}: either way the whole member is set.
		if len(job.Annotations) == 0 {
			set("/metadata/annotations", map[string]string{key: value})
		} else {
			set("/metadata/annotations/"+jsonPointerEscape(key), value)
		}
	}
	return ops
}

// jsonPointerEscape escapes a JSON object member name for a JSON pointer
// (RFC 6901, 3).
func jsonPointerEscape(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// OptIn returns the Job as the opt-in webhook admits it: managedBy
// jobferry.dev/manager and suspended. A Job the user did not suspend is marked
// held for placement, so the manager knows to resume it once placed; a Job
// the user suspended stays theirs to resume. A Job that names another
// controller is left alone.
func OptIn(job *batchv1.Job) (*batchv1.Job, bool) {
	switch ptr.Deref(job.Spec.ManagedBy, "") {
	case "", v1alpha1.ManagerManagedBy:
	default:
		return job, false
	}
	out := job.DeepCopy()
	out.Spec.ManagedBy = ptr.To(v1alpha1.ManagerManagedBy)
	if !ptr.Deref(job.Spec.Suspend, false) {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true"
	}
	out.Spec.Suspend = ptr.To(true)
	return out, true
}

// validator rejects Jobs that mean jobferry but would hang (a managedBy in
// the jobferry.dev/ domain that no jobferry controller answers to, a cluster
// selector that does not parse) and Jobs to dispatch that the dispatch
// policy refuses (see DispatchPolicy.Admit), with the rule in the message.
type validator struct {
	decoder    admission.Decoder
	namespaces NamespaceReader
	policy     *DispatchPolicy
}

func (h *validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Update {
		return h.handleUpdate(req)
	}
	job := &batchv1.Job{}
	if err := h.decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := Validate(job); err != nil {
		return admission.Denied(err.Error())
	}
	if !v1alpha1.IsManagerJob(job) {
		return admission.Allowed("")
	}
	if refusal := OverDispatchBudget(job); refusal != nil {
		// The manager would not place it: refused here, where its author
		// sees why.
		return admission.Denied(refusal.Rule + ": " + refusal.Message)
	}
	job.Namespace = req.Namespace
	ns, err := h.namespaces.Get(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	warnings, refusal := h.policy.Admit(job, ns)
	if refusal != nil {
		return admission.Denied(refusal.Rule + ": " + refusal.Message)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// handleUpdate refuses an update (by anyone but the manager: its
// registration leaves those out) that takes a Job jobferry dispatches past
// what the manager's cache keeps of one (managercache.OverCacheBudget: its
// own parts over cachebudget.ManagerJobCached, or its status over
// cachebudget.JobStatus), through the Job or its status: the manager would
// keep it as its identity only, carry none of its changes and suspend its
// mirror. A Job is held to half that when it is created and placed
// (OverDispatchBudget); the rest is room for what jobferry and Kueue add.
// A Job already past it may still be changed in ways that do not grow it
// (Kueue's suspend, a finalizer removed), and one being deleted in any.
// The earlier version is decoded only for a Job past the budget.
func (h *validator) handleUpdate(req admission.Request) admission.Response {
	job := &batchv1.Job{}
	if err := h.decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !v1alpha1.IsManagerJob(job) || job.DeletionTimestamp != nil {
		return admission.Allowed("")
	}
	over := managercache.OverCacheBudget(job)
	if over == nil {
		return admission.Allowed("")
	}
	old := &batchv1.Job{}
	if err := h.decoder.DecodeRaw(req.OldObject, old); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if managercache.OverCacheBudget(old) != nil && !managercache.Grows(old, job) {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf("%s: this change would make the Job hold more than jobferry keeps of one: %s; "+
		"jobferry would stop acting on it and suspend its mirror until it held less", RuleBudget, over))
}

// NamespaceReader reads namespaces from the manager's cache and, for one
// the cache does not know, from the API server: a namespace created moments
// before the Job in it may not be in the cache yet, and taking it for
// missing would refuse the Job as "not opted in".
type NamespaceReader struct {
	Cache client.Reader
	// API, when set, reads what the cache does not have (a list by name:
	// the manager may list namespaces, not get them).
	API client.Reader
}

// Get reads a namespace; nil when it does not exist. Without a Cache it
// reads the API only.
func (n NamespaceReader) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	var err error = apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	if n.Cache != nil {
		err = n.Cache.Get(ctx, types.NamespacedName{Name: name}, ns)
	}
	switch {
	case err == nil:
		return ns, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	case n.API == nil:
		return nil, nil
	}
	var list corev1.NamespaceList
	if err := n.API.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// Validate checks what jobferry reads from a Job.
func Validate(job *batchv1.Job) error {
	managedBy := ptr.Deref(job.Spec.ManagedBy, "")
	if strings.HasPrefix(managedBy, "jobferry.dev/") && managedBy != v1alpha1.ManagerManagedBy {
		// jobferry.dev/worker too: that controller runs on worker clusters,
		// not on the manager's.
		return fmt.Errorf("spec.managedBy %q names no controller of this cluster, and nothing would ever run this Job: use %q to dispatch it to a worker cluster (%q is for the mirrors on worker clusters)",
			managedBy, v1alpha1.ManagerManagedBy, v1alpha1.WorkerManagedBy)
	}
	if raw, ok := job.Annotations[v1alpha1.ClusterSelectorAnnotation]; ok {
		if _, err := labels.Parse(raw); err != nil {
			return fmt.Errorf("annotation %s is not a label selector: %v", v1alpha1.ClusterSelectorAnnotation, err)
		}
	}
	return nil
}
