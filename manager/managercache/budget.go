package managercache

import (
	"reflect"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/mirror"
)

// overBudgetAnnotation marks a manager Job the cache keeps as its identity
// only, saying why (OverBudgetOf). Only the cache sets it on what it hands
// out; it is not among the sealed annotations.
const overBudgetAnnotation = "jobferry.dev/over-cache-budget"

// OverBudget says why a manager Job's own parts — its metadata and spec,
// as the cache would keep them (cachedJob), but jobferry's sealed state —
// hold more than budget b: nil when they do not. The admission webhook
// refuses a Job over cachebudget.ManagerJob with this (its status is
// jobferry's to write, and not counted there). jobferry's state
// annotations only the manager writes (admission.StatePolicy), and the API
// server bounds them (256 KiB of annotations).
//
// It counts every field of what the cache would hand out (keptView), one
// by one, so that nothing the cache keeps goes uncounted: a field added
// to cachedJob is counted as it is added.
func OverBudget(job *batchv1.Job, b cachebudget.Budget) *cachebudget.Over {
	trimmed := *job
	trim(&trimmed)
	return newCachedManagerJob(&trimmed).overOwnBudget(b)
}

// overOwnBudget is OverBudget of the Job c stands for, measured from what
// the cache hands out of it.
func (c *cachedJob) overOwnBudget(b cachebudget.Budget) *cachebudget.Over {
	return c.meter(b).Over()
}

// meter counts, against b, the parts of the Job c stands for that its
// budget bounds: its metadata (of its annotations jobferry's user inputs
// only) and its spec.
func (c *cachedJob) meter(b cachebudget.Budget) *cachebudget.Meter {
	view := c.view()
	view.Status = batchv1.JobStatus{}
	meter := cachebudget.NewMeter(b)
	meterFields(meter, "metadata.", &view.ObjectMeta, map[string]func(){
		"annotations": func() { meter.MapWhere("metadata.annotations", view.Annotations, userAnnotation) },
	})
	template := view.Spec.Template
	view.Spec.Template = corev1.PodTemplateSpec{}
	meterFields(meter, "spec.", &view.Spec, nil)
	meterFields(meter, "spec.template.metadata.", &template.ObjectMeta, nil)
	meterFields(meter, "spec.template.spec.", &template.Spec, nil)
	return meter
}

// OverCacheBudget says why the manager cluster's cache would keep job, a
// manager Job, as its identity only (nil: it would keep it whole): what
// the validating webhook refuses an update to take a Job to.
func OverCacheBudget(job *batchv1.Job) *cachebudget.Over {
	trimmed := *job
	trim(&trimmed)
	return newCachedManagerJob(&trimmed).overCacheBudget()
}

// Grows says whether next, a later version of the manager Job prev, holds
// more of what the cache counts of one (its own parts, its status) in
// entries or bytes; the fields the API server sets on every write
// (resourceVersion, generation) are not compared.
func Grows(prev, next *batchv1.Job) bool {
	held := func(job *batchv1.Job) (int, int) {
		trimmed := *job
		trimmed.ResourceVersion, trimmed.Generation = prev.ResourceVersion, prev.Generation
		trim(&trimmed)
		entries, bytes := newCachedManagerJob(&trimmed).meter(cachebudget.Unbounded).Held()
		statusEntries, statusBytes := cachebudget.Measure(&job.Status)
		return entries + statusEntries, bytes + statusBytes
	}
	prevEntries, prevBytes := held(prev)
	nextEntries, nextBytes := held(next)
	return nextEntries > prevEntries || nextBytes > prevBytes
}

// overCacheBudget says why the cache keeps the manager Job c stands for
// as its identity only (nil: it keeps it whole): its own parts over
// cachebudget.ManagerJobCached (which leaves room for what jobferry adds
// to a Job it places), or its status over cachebudget.JobStatus.
func (c *cachedJob) overCacheBudget() *cachebudget.Over {
	if over := c.overOwnBudget(cachebudget.ManagerJobCached); over != nil {
		return over
	}
	return cachebudget.JobStatusOver(&c.status)
}

// trim leaves of a manager Job what the cache keeps of its metadata: no
// managedFields, no annotations but jobferry's (stateAnnotations), no
// labels the API server derives from its UID and name. It gives the Job
// maps of its own and writes none it had, so a shallow copy may be trimmed.
func trim(job *batchv1.Job) {
	job.ManagedFields = nil
	job.Annotations = stateAnnotations(job.Annotations)
	job.Labels = mirror.KeptLabels(job.Labels)
	job.Spec.Template.Labels = mirror.KeptLabels(job.Spec.Template.Labels)
}

// meterFields counts each exported field of the struct s points to as the
// field prefix+its JSON name (cachebudget.Measure); a field named in
// special is counted by its function instead.
func meterFields(meter *cachebudget.Meter, prefix string, s any, special map[string]func()) {
	v := reflect.ValueOf(s).Elem()
	for _, f := range cachebudget.ExportedFields(v.Type()) {
		if count, ok := special[f.Name]; ok {
			count()
			continue
		}
		if entries, bytes := cachebudget.MeasureValue(v.Field(f.Index)); entries > 0 || bytes > 0 {
			meter.AddField(prefix, f.Name, entries, bytes)
		}
	}
}

// stateAnnotations are the jobferry.dev/ annotations of a manager Job:
// the only ones the cache's readers read (jobferry's state and the user
// inputs). A mirror takes the Job's other annotations from the Job as the
// API server holds it, read when it is created. nil when there is none.
func stateAnnotations(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		// The marker is the cache's to set (newCachedOverBudget): one
		// written on the Job is not kept.
		if jobstate.InDomain(k) && k != overBudgetAnnotation {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// userAnnotation: an annotation key of a manager Job that the cache keeps
// and others than jobferry write (its user inputs): jobferry.dev/, but
// not sealed state.
func userAnnotation(key string) bool {
	return jobstate.InDomain(key) && key != v1alpha1.StateSealAnnotation && !slices.Contains(jobstate.SealedAnnotations, key)
}

// newCachedOverBudget is a manager Job over its budget as the cache keeps
// it: its identity, jobferry's finalizer (so its deletion still removes
// its mirrors) and why (overBudgetAnnotation).
func newCachedOverBudget(job *batchv1.Job, over *cachebudget.Over) *cachedJob {
	c := newCachedOtherJob(job)
	c.Annotations = map[string]string{overBudgetAnnotation: over.String()}
	for _, f := range job.Finalizers {
		if f == v1alpha1.MirrorFinalizer {
			c.Finalizers = []string{f}
		}
	}
	return c
}

// OverBudgetOf says whether the cache keeps a manager Job it handed out
// as its identity only, being over its budget, and why: such a Job is not
// acted on until it is within its budget again (but for its deletion).
func OverBudgetOf(job metav1.Object) (string, bool) {
	why, over := job.GetAnnotations()[overBudgetAnnotation]
	return why, over
}

// Handed is job as the manager cluster's cache hands it out (its Get and
// List): a manager Job without what only its mirror needs, or its identity
// only when over its budget; any other Job its identity. For tests of what
// the cache's readers do with what they get.
func Handed(job *batchv1.Job) *batchv1.Job {
	kept, _ := trimJob(job.DeepCopy())
	return kept.(runtime.Object).DeepCopyObject().(*batchv1.Job)
}
