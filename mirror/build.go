package mirror

import (
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/directives"
)

// Identity names the manager Job and dispatch attempt a mirror stands for.
type Identity struct {
	// Origin names the jobferry installation (--origin), so several managers
	// can share a worker.
	Origin string
	// UID is the manager Job's UID.
	UID types.UID
	// Attempt counts dispatches of the manager Job, from 1.
	Attempt int
	// Manager identifies the manager installation (ManagerIDLabel); none
	// when empty.
	Manager string
}

// IdentityLabelKeys are the keys of the labels Identity.Labels gives, and
// the seal of its attempt the manager adds as it creates the mirror (it
// holds the key): the only labels the manager reads of a Job on a worker.
var IdentityLabelKeys = []string{v1alpha1.OriginLabel, v1alpha1.OriginUIDLabel, v1alpha1.DispatchAttemptLabel, v1alpha1.ManagerIDLabel, v1alpha1.AttemptSealLabel}

// Labels are the labels that mark a mirror as jobferry's (keys among
// IdentityLabelKeys).
func (id Identity) Labels() map[string]string {
	labels := map[string]string{
		v1alpha1.OriginLabel:          id.Origin,
		v1alpha1.OriginUIDLabel:       string(id.UID),
		v1alpha1.DispatchAttemptLabel: strconv.Itoa(id.Attempt),
	}
	if id.Manager != "" {
		labels[v1alpha1.ManagerIDLabel] = id.Manager
	}
	return labels
}

// OtherManager reports whether a Job with this installation's origin label
// says another manager installation created it. One without the label
// (made by a manager before there was one) says nothing.
func OtherManager(m metav1.Object, manager string) bool {
	id, ok := m.GetLabels()[v1alpha1.ManagerIDLabel]
	return ok && id != manager
}

// Labels the API server derives from a Job's UID: they must not travel to the
// mirror, whose own UID differs.
// The unprefixed names are the legacy copies the API server still sets.
var generatedLabels = []string{
	batchv1.ControllerUidLabel, "controller-uid",
	batchv1.JobNameLabel, "job-name",
}

// Labels by which Kueue queues a Job (its LocalQueue, its priority class):
// Kueue on the manager admitted the manager Job already, so they do not
// travel to the mirror, lest a Kueue on the worker queue (and suspend) it
// a second time.
var queueLabels = []string{"kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"}

// Build returns the mirror of a manager Job for a worker: same namespace,
// name, labels, annotations and spec, except that
//   - managedBy is dropped (the worker's kube-controller-manager runs it) or
//     set to jobferry.dev/worker (the jobferry worker controller runs it);
//   - the selector and the labels derived from the manager Job's UID are
//     dropped, so the worker's API server generates its own;
//   - ttlSecondsAfterFinished is dropped: the manager deletes the mirror once
//     its final status is copied, while a worker TTL could delete it first;
//   - Kueue's queue labels are dropped (queueLabels);
//   - the origin labels are added, and the worker's scheduling directives (if
//     any) are merged into the template when they could not be written into the
//     manager Job.
func Build(job *batchv1.Job, id Identity, controller v1alpha1.JobControllerMode, scheduling *v1alpha1.SchedulingDirectives) (*batchv1.Job, error) {
	mirror := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   job.Namespace,
			Name:        job.Name,
			Labels:      WithoutGeneratedLabels(job.Labels),
			Annotations: maps.Clone(job.Annotations),
		},
		Spec: *job.Spec.DeepCopy(),
	}
	if mirror.Labels == nil {
		mirror.Labels = map[string]string{}
	}
	for _, l := range queueLabels {
		delete(mirror.Labels, l)
	}
	maps.Copy(mirror.Labels, id.Labels())
	delete(mirror.Annotations, "kubectl.kubernetes.io/last-applied-configuration")

	spec := &mirror.Spec
	spec.Selector = nil
	spec.ManualSelector = nil
	spec.TTLSecondsAfterFinished = nil
	spec.ManagedBy = nil
	if controller == v1alpha1.JobControllerWorker {
		spec.ManagedBy = ptr.To(v1alpha1.WorkerManagedBy)
	}
	spec.Template.Labels = WithoutGeneratedLabels(spec.Template.Labels)
	if scheduling != nil {
		merged, err := directives.Merge(spec.Template, *scheduling)
		if err != nil {
			return nil, err
		}
		spec.Template = merged
	}
	return mirror, nil
}

// WithoutGeneratedLabels is labels without those the API server derives
// from a Job's own UID and name (a copy; nil stays nil).
func WithoutGeneratedLabels(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	for _, l := range generatedLabels {
		delete(out, l)
	}
	return out
}

// Generated says whether a label key is one the API server derives from a
// Job's UID and name (WithoutGeneratedLabels leaves them out).
func Generated(key string) bool { return slices.Contains(generatedLabels, key) }

// KeptLabels is WithoutGeneratedLabels, nil when no label is left: what the
// manager's caches keep of a Job's or a template's labels, so that a Job
// with the generated labels alone holds no map.
func KeptLabels(labels map[string]string) map[string]string {
	if labels = WithoutGeneratedLabels(labels); len(labels) == 0 {
		return nil
	}
	return labels
}

// Attempt is the dispatch attempt a mirror carries (its label); 0 when it
// carries none.
func Attempt(m metav1.Object) int {
	n, err := strconv.Atoi(m.GetLabels()[v1alpha1.DispatchAttemptLabel])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// IsMirrorOf reports whether a worker Job was created by this jobferry
// installation for the manager Job with the given UID. Anything else — a
// user's Job that happens to share the name, or another manager's mirror — is
// never updated or deleted.
func IsMirrorOf(remote metav1.Object, origin string, uid types.UID) bool {
	labels := remote.GetLabels()
	return labels[v1alpha1.OriginLabel] == origin && labels[v1alpha1.OriginUIDLabel] == string(uid)
}
