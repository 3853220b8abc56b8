// Package tenantlimits holds a dispatched Job to what its namespace on the
// manager cluster allows a tenant: before its first mirror, one of its pods
// is dry-run in that namespace (PodAdmission), so every admission plugin
// and webhook of the manager cluster judges it — LimitRange defaults and
// maxima, PriorityClass rules, Pod Security, policy engines — and the
// namespace's ResourceQuotas bound what its dispatched, unfinished Jobs
// take together across all workers (QuotaRefuses), counted from what was
// sealed on each when it was placed (v1alpha1.AdmittedPods).
package tenantlimits

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/jobpods"
)

// The dry-run creates a pod as the manager's own identity. The manager
// chart's ValidatingAdmissionPolicy <release>-dry-run-pods refuses any
// pod it creates for real (admission.DryRunPodsPolicy), so the right
// gives it nothing but the admission's verdict: no pod is ever stored,
// scheduled, or given a ServiceAccount's token.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=create

// PodVerdict is what the manager namespace's admission made of a pod of the
// Job.
type PodVerdict struct {
	// Refused is the API server's answer when it refused the pod ("" when
	// admitted): the admission plugin's or webhook's own message.
	Refused string
	// Admitted is what it admitted (when not Refused).
	Admitted v1alpha1.AdmittedPods
}

// PodAdmission dry-runs one pod of a Job in its namespace, as a Job
// controller would create it (package jobpods), and remembers the verdict
// for the Job's generation for a while: a Job waiting for room is placed
// again at every capacity change, and the answer changes only with its
// spec or its namespace's policies (hence the expiry).
type PodAdmission struct {
	// Reader reads the Job whole from the API server: the manager's cache
	// keeps no images, commands or environments, which webhooks judge.
	Reader client.Reader
	// Writer sends the dry-run.
	Writer client.Writer
	memo   *cache.LRUExpireCache
	clock  clock.Clock
}

// remembered is a verdict, the digest of the pod template it judged, and
// when it is no longer taken.
type remembered struct {
	verdict  PodVerdict
	template templateDigest
	until    time.Time
}

// templateDigest names a pod template by its content: the SHA-256 of its
// JSON (a template that encodes differently but means the same only costs
// a dry-run).
type templateDigest [sha256.Size]byte

func digestOf(t corev1.PodTemplateSpec) (templateDigest, bool) {
	data, err := json.Marshal(t)
	if err != nil {
		return templateDigest{}, false
	}
	return sha256.Sum256(data), true
}

// Remembered verdicts: at most memoSize; an admission for admittedTTL (a
// Job waiting for room is placed again at capacity changes and at least
// every 5 minutes), a refusal for refusedTTL (its tenant or administrator
// may fix it any time).
const (
	memoSize    = 10_000
	admittedTTL = 5 * time.Minute
	refusedTTL  = time.Minute
)

// NewPodAdmission is a PodAdmission that dry-runs with writer, reading Jobs
// with reader.
func NewPodAdmission(reader client.Reader, writer client.Writer, clk clock.Clock) *PodAdmission {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &PodAdmission{Reader: reader, Writer: writer, memo: cache.NewLRUExpireCacheWithClock(memoSize, clk), clock: clk}
}

// Admit dry-runs a pod of job (as the cache holds it: its UID and
// generation name the verdict) in its namespace. An error is one to retry
// (the Job gone or changed since it was read, the API server or a webhook
// failing); a refusal is the verdict's.
func (a *PodAdmission) Admit(ctx context.Context, job *batchv1.Job) (PodVerdict, error) {
	if v, ok := a.memo.Get(memoKey(job)); ok {
		return v.(remembered).verdict, nil
	}
	whole := &batchv1.Job{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, whole); err != nil {
		return PodVerdict{}, err
	}
	if whole.UID != job.UID || whole.Generation != job.Generation {
		return PodVerdict{}, apierrors.NewConflict(batchv1.Resource("jobs"), job.Name, errChanged)
	}
	index := jobpods.NoIndex
	if jobpods.IsIndexed(whole) {
		index = 0
	}
	pod := jobpods.New(whole, jobpods.Template(whole), index)
	// A cluster that enforces owner-reference permissions would ask the
	// manager for rights on the Job's finalizers to block its deletion;
	// admission judges the pod the same without.
	for i := range pod.OwnerReferences {
		pod.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	var verdict PodVerdict
	switch err := a.Writer.Create(ctx, pod, client.DryRunAll); {
	case err == nil:
		verdict.Admitted = Admitted(whole, pod)
	case apierrors.IsForbidden(err) && !a.mayCreatePods(ctx, whole.Namespace):
		// Not the namespace's verdict: the manager's own role lacks the
		// right (a chart without it, an edited ClusterRole). Retried, and
		// logged, rather than shown to the tenant as their pods' fault.
		return PodVerdict{}, fmt.Errorf("the manager may not create pods in namespace %s for its dry-run (its role grants create pods; the chart's ClusterRole has it): %w", whole.Namespace, err)
	case refusal(err):
		verdict.Refused = withoutRandomName(err, pod.GenerateName)
	default:
		return PodVerdict{}, err
	}
	ttl := admittedTTL
	if verdict.Refused != "" {
		ttl = refusedTTL
	}
	judged, _ := digestOf(whole.Spec.Template)
	a.memo.Add(memoKey(job), remembered{verdict: verdict, template: judged, until: a.clock.Now().Add(ttl)}, ttl)
	return verdict, nil
}

// Carry remembers the verdict of job's generation, if one is remembered
// and admitted, for written too, until it would have expired. written is
// the same Job as jobferry's own write left it (the API server's answer,
// whole), locked to job's resourceVersion, one generation on, its pod
// template's scheduling put back by the caller as its user wrote it: the
// write changed the template by a worker's directives alone (and lifted
// its suspension), which the worker's admission judges. The template must
// then be the one the dry-run judged: a mutating webhook of the manager
// cluster that changed anything else in the same write (a container, an
// image) leaves the verdict behind, and the mirror's pods are dry-run
// again. Otherwise the mirror the placement leads to is created without
// dry-running the same pods a second time.
func (a *PodAdmission) Carry(job, written *batchv1.Job) {
	if written.UID != job.UID || written.Generation != job.Generation+1 || written.ResourceVersion == job.ResourceVersion {
		return
	}
	v, ok := a.memo.Get(memoKey(job))
	if !ok {
		return
	}
	r := v.(remembered)
	if r.verdict.Refused != "" {
		return
	}
	if got, ok := digestOf(written.Spec.Template); !ok || got != r.template {
		return
	}
	if left := r.until.Sub(a.clock.Now()); left > 0 {
		a.memo.Add(memoKey(written), r, left)
	}
}

// memoKey names a verdict: the Job's UID and generation (its spec as the
// dry-run judged it).
func memoKey(job *batchv1.Job) string {
	return string(job.UID) + "/" + strconv.FormatInt(job.Generation, 10)
}

// mayCreatePods asks the API server whether the manager may create pods in
// namespace (a SelfSubjectAccessReview, which every authenticated user may
// make); an answer it cannot get counts as yes, so the refusal stands.
func (a *PodAdmission) mayCreatePods(ctx context.Context, namespace string) bool {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"},
	}}
	if err := a.Writer.Create(ctx, review); err != nil {
		return true
	}
	return review.Status.Allowed
}

// withoutRandomName is the refusal's message with the name the API server
// generated for the pod written as its prefix and xxxxx (as in
// `pods "train-xxxxx" is forbidden: ...`): the same refusal then reads the
// same at every dry-run, and the Job's condition is not rewritten for it.
func withoutRandomName(err error, generateName string) string {
	// Wherever it is (a webhook's denial names it in its own words): the
	// API server's generated suffix is five of these characters.
	generated := regexp.MustCompile(regexp.QuoteMeta(generateName) + "[bcdfghjklmnpqrstvwxz2456789]{5}")
	return generated.ReplaceAllLiteralString(err.Error(), generateName+"xxxxx")
}

// refusal: the API server's admission turned the pod down (a plugin's or a
// webhook's denial, an invalid pod); anything else is worth retrying.
func refusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// errChanged: the Job the API server holds is not the one the cache showed
// (recreated, or its spec changed); the reconcile its change brings decides.
var errChanged = errors.New("the Job changed since it was read; it is looked at again")
