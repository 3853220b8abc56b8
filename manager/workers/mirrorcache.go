package workers

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/sharedstrings"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/mirror"
)

// cachedMirror is what a worker's cache keeps of a Job with this
// installation's origin label (the manager's mirrors and whatever else
// carries the label): what the manager reads, and nothing else. Its
// identity and jobferry's identity labels; the spec fields a change of the
// manager Job is carried to (mirror.SpecUpdate) and the pod template's
// scheduling fields and metadata (without the labels the worker derives
// from the mirror's UID and name); its status, which the worker's Job
// controller writes. Containers, volumes and the rest of the pod spec are
// what makes a Job large, and the manager never reads them from a worker:
// it writes the mirror from the manager Job, and updates it with patches
// of the fields it compares. A type of its own rather than a trimmed
// batchv1.Job: the manager holds one per tracked Job, and a batchv1.Job
// costs 1,408 bytes of struct however little of it is set, this a third of
// that (the manager's memory per tracked Job, issue 27).
//
// A Job with the label is anyone's to create who may create Jobs in the
// worker namespace, so what is kept of one is within cachebudget.Mirror;
// of a Job over it only the identity is kept (overBudgetAnnotation says
// why), so the cache grows with the number of such Jobs, never with their size.
type cachedMirror struct {
	// ObjectMeta holds the identity and jobferry's identity labels only
	// (and makes the informer's key and namespace index work as for a
	// Job); of a Job over its budget, overBudgetAnnotation too.
	metav1.ObjectMeta
	spec   cachedMirrorSpec
	status batchv1.JobStatus
}

// overBudgetAnnotation marks the view of a Job the cache keeps as its
// identity only, saying why (OverBudget). Only the cache sets it: it keeps
// no annotation of a Job's own.
const overBudgetAnnotation = "jobferry.dev/over-cache-budget"

// OverBudget says whether a Job a worker's mirror cache gave back (a
// Connection's Mirror, Mirrors or MirrorMetas) is only the identity of a
// Job over cachebudget.Mirror, and why. Its spec and status are not
// there: WholeMirror reads them, for a mirror the manager created.
func OverBudget(m metav1.Object) (string, bool) {
	why, over := m.GetAnnotations()[overBudgetAnnotation]
	return why, over
}

// IsOverBudget: m is only the identity of a Job over its budget
// (OverBudget).
func IsOverBudget(m metav1.Object) bool {
	_, over := OverBudget(m)
	return over
}

// cachedMirrorSpec is what cachedMirror keeps of the Job's spec.
type cachedMirrorSpec struct {
	parallelism, completions                             *int32
	activeDeadlineSeconds                                *int64
	backoffLimit, backoffLimitPerIndex, maxFailedIndexes *int32
	suspend                                              *bool
	completionMode                                       *batchv1.CompletionMode
	managedBy                                            *string
	templateLabels, templateAnnotations, nodeSelector    map[string]string
	tolerations                                          []corev1.Toleration
	schedulingGates                                      []corev1.PodSchedulingGate
	nodeAffinity                                         *corev1.NodeAffinity
}

// mirrorTransform is the mirror cache's transform: a Job as cachedMirror
// keeps it, each one over its budget told to overBudget (nil: none is
// told). Anything else (a tombstone never reaches a transform) passes as
// it is.
func mirrorTransform(overBudget func(job types.NamespacedName, over *cachebudget.Over)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		job, ok := obj.(*batchv1.Job)
		if !ok {
			return obj, nil
		}
		m, over := newCachedMirror(job)
		if over != nil && overBudget != nil {
			overBudget(types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, over)
		}
		return m, nil
	}
}

// newCachedMirror is a Job as the mirror cache keeps it: what the manager
// reads of it when that is within cachebudget.Mirror, its identity only
// otherwise, saying why (over).
func newCachedMirror(job *batchv1.Job) (m *cachedMirror, over *cachebudget.Over) {
	meter := cachebudget.NewMeter(cachebudget.Mirror)
	meterMirror(meter, job)
	if over = meter.Over(); over == nil {
		return keptMirror(job), nil
	}
	m = &cachedMirror{ObjectMeta: mirrorIdentity(job)}
	m.Annotations = map[string]string{overBudgetAnnotation: over.String()}
	return m, over
}

// meterMirror counts what keptMirror keeps of a Job, field by field (the
// identity aside: its names are the API server's to bound).
func meterMirror(meter *cachebudget.Meter, job *batchv1.Job) {
	template := &job.Spec.Template
	meter.MapWhere("metadata.labels", job.Labels, isIdentityLabel)
	meter.MapWhere("spec.template.metadata.labels", template.Labels, func(k string) bool { return !mirror.Generated(k) })
	meter.Map("spec.template.metadata.annotations", template.Annotations)
	meter.Map("spec.template.spec.nodeSelector", template.Spec.NodeSelector)
	tolerations := 0
	for i := range template.Spec.Tolerations {
		tolerations += template.Spec.Tolerations[i].Size()
	}
	meter.Add("spec.template.spec.tolerations", len(template.Spec.Tolerations), tolerations)
	gates := 0
	for i := range template.Spec.SchedulingGates {
		gates += template.Spec.SchedulingGates[i].Size()
	}
	meter.Add("spec.template.spec.schedulingGates", len(template.Spec.SchedulingGates), gates)
	if a := template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		meter.Add("spec.template.spec.affinity.nodeAffinity", nodeAffinityEntries(a.NodeAffinity), a.NodeAffinity.Size())
	}
	status := &job.Status
	entries := len(status.Conditions)
	if u := status.UncountedTerminatedPods; u != nil {
		entries += len(u.Succeeded) + len(u.Failed)
	}
	meter.Add("status", entries, status.Size())
}

// nodeAffinityEntries counts the terms, requirements and values of a node
// affinity.
func nodeAffinityEntries(a *corev1.NodeAffinity) int {
	n := 0
	term := func(t *corev1.NodeSelectorTerm) {
		n++
		for _, r := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
			for i := range r {
				n += 1 + len(r[i].Values)
			}
		}
	}
	if req := a.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i := range req.NodeSelectorTerms {
			term(&req.NodeSelectorTerms[i])
		}
	}
	for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		term(&a.PreferredDuringSchedulingIgnoredDuringExecution[i].Preference)
	}
	return n
}

// mirrorIdentity is what the cache keeps of any Job with the origin label:
// its identity and jobferry's identity labels.
func mirrorIdentity(job *batchv1.Job) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: sharedstrings.Canonical(job.Namespace), Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion, Generation: job.Generation,
		CreationTimestamp: job.CreationTimestamp, DeletionTimestamp: job.DeletionTimestamp, Labels: jobferryLabels(job.Labels),
	}
}

// keptMirror is what the cache keeps of a Job within its budget (and what
// WholeMirror gives of any).
func keptMirror(job *batchv1.Job) *cachedMirror {
	spec, template := job.Spec, job.Spec.Template
	m := &cachedMirror{
		ObjectMeta: mirrorIdentity(job),
		spec: cachedMirrorSpec{
			parallelism: spec.Parallelism, completions: spec.Completions, activeDeadlineSeconds: spec.ActiveDeadlineSeconds,
			backoffLimit: spec.BackoffLimit, backoffLimitPerIndex: spec.BackoffLimitPerIndex, maxFailedIndexes: spec.MaxFailedIndexes,
			suspend: spec.Suspend, completionMode: spec.CompletionMode, managedBy: spec.ManagedBy,
			templateLabels: sharedKeys(templateLabels(template.Labels)), templateAnnotations: sharedKeys(template.Annotations),
			nodeSelector: template.Spec.NodeSelector, tolerations: template.Spec.Tolerations, schedulingGates: template.Spec.SchedulingGates,
		},
		status: job.Status,
	}
	sharedstrings.Conditions(m.status.Conditions)
	if a := template.Spec.Affinity; a != nil {
		m.spec.nodeAffinity = a.NodeAffinity
	}
	return m
}

// jobKind is the type of every Job the mirror cache gives back, as a
// controller-runtime cache sets it.
var jobKind = metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"}

// view is the mirror as a Job that shares the cache's maps, slices and
// pointers: to read, never to change (Connection.Mirror gives a copy). Of
// a Job over its budget, its identity only, marked (OverBudget).
func (m *cachedMirror) view() batchv1.Job {
	if IsOverBudget(&m.ObjectMeta) {
		return batchv1.Job{TypeMeta: jobKind, ObjectMeta: m.ObjectMeta}
	}
	s := m.spec
	job := batchv1.Job{
		TypeMeta:   jobKind,
		ObjectMeta: m.ObjectMeta,
		Spec: batchv1.JobSpec{
			Parallelism: s.parallelism, Completions: s.completions, ActiveDeadlineSeconds: s.activeDeadlineSeconds,
			BackoffLimit: s.backoffLimit, BackoffLimitPerIndex: s.backoffLimitPerIndex, MaxFailedIndexes: s.maxFailedIndexes,
			Suspend: s.suspend, CompletionMode: s.completionMode, ManagedBy: s.managedBy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: s.templateLabels, Annotations: s.templateAnnotations},
				Spec: corev1.PodSpec{NodeSelector: s.nodeSelector, Tolerations: s.tolerations,
					SchedulingGates: s.schedulingGates},
			},
		},
		Status: m.status,
	}
	if s.nodeAffinity != nil {
		job.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: s.nodeAffinity}
	}
	return job
}

// job is the mirror as a Job of the caller's own.
func (m *cachedMirror) job() *batchv1.Job {
	view := m.view()
	return view.DeepCopy()
}

// SlimMirror is a Job as a worker's mirror cache gives it back (what
// cachedMirror keeps of it), for fakes of a connection.
func SlimMirror(job *batchv1.Job) *batchv1.Job {
	m, _ := newCachedMirror(job)
	return m.job()
}

// WholeMirror reads the Job key from the worker's API server and gives
// what the mirror cache would keep of it were it within its budget (nil
// when it is gone or carries no origin label of origin): for a mirror the
// manager created (its UID recorded) that the cache keeps as its identity
// only (OverBudget). Nothing of it is kept.
func WholeMirror(ctx context.Context, conn Conn, origin string, key types.NamespacedName) (*batchv1.Job, error) {
	job, err := conn.UncachedJob(ctx, key)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Job %s, over the mirror cache's budget, from the worker: %w", key, err)
	}
	if job.Labels[v1alpha1.OriginLabel] != origin {
		return nil, nil
	}
	return keptMirror(job).job(), nil
}

// jobferryLabels are a Job's jobferry.dev/ labels that the manager reads
// on a worker: those of a mirror's identity (mirror.IdentityLabelKeys);
// nil when it has none. The keys, and the values every mirror of this
// manager repeats (its origin, the attempt), are shared copies (package
// sharedstrings); the origin UID and the attempt's seal are the mirror's
// own.
func jobferryLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for _, k := range mirror.IdentityLabelKeys {
		v, ok := labels[k]
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(mirror.IdentityLabelKeys))
		}
		// A Job's own values are not shared with another's.
		if k != v1alpha1.OriginUIDLabel && k != v1alpha1.AttemptSealLabel {
			v = sharedstrings.Canonical(v)
		}
		out[k] = v
	}
	return out
}

// isIdentityLabel: a label key of a mirror's identity.
func isIdentityLabel(key string) bool { return slices.Contains(mirror.IdentityLabelKeys, key) }

// templateLabels are a mirror's pod template labels without those its
// worker's API server derives from the mirror's UID and name (nil when none
// is left): the manager compares the rest with its Job's template
// (mirror.SpecUpdate), and a carry to the mirror is a patch of what
// changed, which leaves them be. Their four values, two of them UIDs, were a
// tenth of the manager's live heap per tracked Job.
func templateLabels(labels map[string]string) map[string]string {
	return mirror.KeptLabels(labels)
}

// sharedKeys is m with its keys shared (package sharedstrings).
func sharedKeys(m map[string]string) map[string]string {
	sharedstrings.Keys(m)
	return m
}

// mirrorCache watches this installation's mirrors on a worker (the Jobs
// with its origin label) in each namespace the manager may use there, or
// in all, and keeps each as a cachedMirror: client-go informers of its
// own, as controller-runtime's cache keeps the type it lists.
type mirrorCache struct {
	// informers by namespace, or one under metav1.NamespaceAll when the
	// manager may use every namespace.
	informers map[string]toolscache.SharedIndexInformer
}

func newMirrorCache(cfg *rest.Config, origin string, namespaces []string, onWatchError toolscache.WatchErrorHandlerWithContext, overBudget func(types.NamespacedName, *cachebudget.Over), manager string, foreignDropped func(types.NamespacedName)) (*mirrorCache, error) {
	cfg = rest.CopyConfig(cfg)
	// Mirrors are built-in Jobs: protobuf decodes them for less.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the mirror cache's client: %w", err)
	}
	selector := labels.SelectorFromSet(labels.Set{v1alpha1.OriginLabel: origin}).String()
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	c := &mirrorCache{informers: map[string]toolscache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		// A cap of its own: a list replaces this informer's store only.
		lw := newForeignCap(manager, MaxForeignJobsPerNamespace, foreignDropped).listWatch(toolscache.NewFilteredListWatchFromClient(clients.BatchV1().RESTClient(), "jobs", ns, func(o *metav1.ListOptions) { o.LabelSelector = selector }))
		informer := toolscache.NewSharedIndexInformerWithOptions(lw, &batchv1.Job{}, toolscache.SharedIndexInformerOptions{
			Indexers:          toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
			ObjectDescription: "mirror Jobs",
		})
		if err := informer.SetTransform(mirrorTransform(overBudget)); err != nil {
			return nil, err
		}
		if err := informer.SetWatchErrorHandlerWithContext(onWatchError); err != nil {
			return nil, err
		}
		c.informers[ns] = informer
	}
	return c, nil
}

// addHandler has every informer tell h what it sees (cachedMirrors).
func (c *mirrorCache) addHandler(h toolscache.ResourceEventHandler) error {
	for _, informer := range c.informers {
		if _, err := informer.AddEventHandler(h); err != nil {
			return err
		}
	}
	return nil
}

// run runs the informers until ctx ends.
func (c *mirrorCache) run(ctx context.Context) {
	for _, informer := range c.informers {
		go informer.RunWithContext(ctx)
	}
}

// hasSynced: every informer holds what its first list found.
func (c *mirrorCache) hasSynced() bool {
	for _, informer := range c.informers {
		if !informer.HasSynced() {
			return false
		}
	}
	return true
}

// informer is the one that watches namespace ns (nil: none does).
func (c *mirrorCache) informer(ns string) toolscache.SharedIndexInformer {
	if informer, ok := c.informers[metav1.NamespaceAll]; ok {
		return informer
	}
	return c.informers[ns]
}

// get is the mirror key, nil when the cache holds none.
func (c *mirrorCache) get(key types.NamespacedName) (*cachedMirror, error) {
	informer := c.informer(key.Namespace)
	if informer == nil {
		return nil, nil
	}
	obj, found, err := informer.GetIndexer().GetByKey(key.String())
	if err != nil || !found {
		return nil, err
	}
	m, ok := obj.(*cachedMirror)
	if !ok {
		return nil, fmt.Errorf("the mirror cache holds a %T for %s", obj, key)
	}
	return m, nil
}

// list is the mirrors in namespace ns, or in every namespace watched
// (metav1.NamespaceAll).
func (c *mirrorCache) list(ns string) ([]*cachedMirror, error) {
	var objs []any
	switch informer := c.informer(ns); {
	case ns == metav1.NamespaceAll:
		for _, informer := range c.informers {
			objs = append(objs, informer.GetIndexer().List()...)
		}
	case informer == nil:
	default:
		var err error
		if objs, err = informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns); err != nil {
			return nil, err
		}
	}
	out := make([]*cachedMirror, 0, len(objs))
	for _, obj := range objs {
		m, ok := obj.(*cachedMirror)
		if !ok {
			return nil, fmt.Errorf("the mirror cache holds a %T", obj)
		}
		out = append(out, m)
	}
	return out, nil
}
