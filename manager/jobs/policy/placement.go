package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/internal/directives"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/mirror"
)

// PlacedJob is the manager Job as the one write that dispatches it leaves
// it: placed on worker with the next attempt, the worker's directives in
// its template (KEP-2926; the template is still mutable while the webhook
// holds it) and unsuspended — or, when the template may no longer change,
// the directives recorded as going into the mirror only. The placement is
// written before the mirror exists, so a manager that restarts in between
// finds it and creates the mirror where it was meant.
func PlacedJob(job *batchv1.Job, worker string, scheduling v1alpha1.SchedulingDirectives) (*batchv1.Job, error) {
	updated, err := ActivatedJob(job, worker, scheduling)
	if err != nil {
		return nil, err
	}
	return WithPlacement(updated, worker, jobstate.Attempt(job)+1), nil
}

// PlacedQueuedJob is a queued manager Job (Kueue's) as the write that
// places it leaves it: placed on worker with the next attempt, and no
// longer marked held for placement — Kueue, not jobferry, unsuspends it
// when it admits it, injecting the worker's directives (the check's pod set
// updates); the mirror gets every directive in any case (mirror.Build).
func PlacedQueuedJob(job *batchv1.Job, worker string) *batchv1.Job {
	updated := WithPlacement(job.DeepCopy(), worker, jobstate.Attempt(job)+1)
	delete(updated.Annotations, v1alpha1.HeldForPlacementAnnotation)
	return updated
}

// WithAdmittedPods records, on job, what its namespace admitted of its pods
// (sealed with the placement it goes with).
func WithAdmittedPods(job *batchv1.Job, admitted v1alpha1.AdmittedPods) error {
	data, err := json.Marshal(admitted)
	if err != nil {
		return err
	}
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, v1alpha1.AdmittedPodsAnnotation, string(data))
	return nil
}

// WithPlacement records, on job, its placement on worker as attempt; the
// attempt's mirror is recorded once created. The worker is a label too, for
// kubectl get -l (v1alpha1.WorkerLabel).
func WithPlacement(job *batchv1.Job, worker string, attempt int) *batchv1.Job {
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, v1alpha1.WorkerAnnotation, worker)
	metav1.SetMetaDataLabel(&job.ObjectMeta, v1alpha1.WorkerLabel, worker)
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, v1alpha1.DispatchAttemptAnnotation, strconv.Itoa(attempt))
	delete(job.Annotations, v1alpha1.MirrorUIDAnnotation)
	return job
}

// managerStartedTemplatesMutable is the manager cluster's template rule
// (mirror.TemplateMutable) as the manager takes it: the pinned minor's
// (v1.36). A manager cluster before v1.36 refuses the change for a Job that
// has started (one placed again after its worker was lost or Kueue evicted
// it), a refused write as any other (package jobs, refusals.go): a known limit of a
// manager cluster on an older minor (docs/reference/compatibility.md).
const managerStartedTemplatesMutable = true

// ActivatedJob is the Job with worker's directives injected and, when the
// webhook held it for placement, unsuspended.
func ActivatedJob(job *batchv1.Job, worker string, scheduling v1alpha1.SchedulingDirectives) (*batchv1.Job, error) {
	updated := job.DeepCopy()
	if NeedsActivation(job) && mirror.TemplateMutable(job, managerStartedTemplatesMutable) {
		user := UserScheduling(job)
		merged, err := directives.Merge(WithScheduling(job.Spec.Template, user), scheduling)
		if err != nil {
			return nil, fmt.Errorf("merging %s's directives into the pod template: %w", worker, err)
		}
		data, err := json.Marshal(user)
		if err != nil {
			return nil, err
		}
		updated.Spec.Template = merged
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.UserSchedulingAnnotation, string(data))
		delete(updated.Annotations, v1alpha1.InjectedDirectivesAnnotation)
	} else {
		data, err := json.Marshal(scheduling)
		if err != nil {
			return nil, err
		}
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, v1alpha1.InjectedDirectivesAnnotation, string(data))
	}
	if NeedsActivation(job) {
		updated.Spec.Suspend = ptr.To(false)
		delete(updated.Annotations, v1alpha1.HeldForPlacementAnnotation)
	}
	return updated, nil
}

// ReleasedJob is the manager Job placed again: its placement undone and,
// when jobferry unsuspended it and nothing ran yet, held for placement
// again, so the next worker's directives go onto the user's template
// rather than onto the first worker's.
func ReleasedJob(job *batchv1.Job) *batchv1.Job {
	updated := job.DeepCopy()
	delete(updated.Annotations, v1alpha1.WorkerAnnotation)
	delete(updated.Labels, v1alpha1.WorkerLabel)
	delete(updated.Annotations, v1alpha1.MirrorUIDAnnotation)
	_, injected := job.Annotations[v1alpha1.UserSchedulingAnnotation]
	if injected && !ptr.Deref(job.Spec.Suspend, false) && job.Status.StartTime == nil && job.Status.Active == 0 {
		updated.Spec.Suspend = ptr.To(true)
		updated.Annotations[v1alpha1.HeldForPlacementAnnotation] = "true"
	}
	return updated
}

// SchedulingAsUserWrote: the Job's pod template schedules as UserScheduling
// says its user wrote it, so a placement (ActivatedJob) changes its
// template by the worker's directives alone. A Job placed before and
// released keeps the earlier worker's directives in its template until
// then, and its user may have changed them meanwhile.
func SchedulingAsUserWrote(job *batchv1.Job) bool {
	return equality.Semantic.DeepEqual(WithScheduling(job.Spec.Template, UserScheduling(job)), job.Spec.Template)
}

// UserScheduling is the scheduling part of the Job's pod template as its
// user wrote it: recorded when a worker's directives were merged in, the
// template itself otherwise.
func UserScheduling(job *batchv1.Job) v1alpha1.SchedulingDirectives {
	if raw, ok := job.Annotations[v1alpha1.UserSchedulingAnnotation]; ok {
		var d v1alpha1.SchedulingDirectives
		if json.Unmarshal([]byte(raw), &d) == nil {
			return d
		}
	}
	spec := job.Spec.Template.Spec
	d := v1alpha1.SchedulingDirectives{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations}
	if spec.Affinity != nil {
		d.NodeAffinity = spec.Affinity.NodeAffinity
	}
	return *d.DeepCopy()
}

// WithScheduling is template with its nodeSelector, tolerations and node
// affinity replaced by d's.
func WithScheduling(template corev1.PodTemplateSpec, d v1alpha1.SchedulingDirectives) corev1.PodTemplateSpec {
	out := *template.DeepCopy()
	d = *d.DeepCopy()
	out.Spec.NodeSelector, out.Spec.Tolerations = d.NodeSelector, d.Tolerations
	if d.NodeAffinity != nil || out.Spec.Affinity != nil {
		if out.Spec.Affinity == nil {
			out.Spec.Affinity = &corev1.Affinity{}
		}
		out.Spec.Affinity.NodeAffinity = d.NodeAffinity
		if *out.Spec.Affinity == (corev1.Affinity{}) {
			out.Spec.Affinity = nil
		}
	}
	return out
}

// AsUserWroteIt is the Job as placement evaluates it: held for placement,
// with the pod template's scheduling as its user wrote it, whatever an
// earlier placement merged in.
func AsUserWroteIt(job *batchv1.Job) *batchv1.Job {
	if _, ok := job.Annotations[v1alpha1.UserSchedulingAnnotation]; !ok || !NeedsActivation(job) || !mirror.TemplateMutable(job, managerStartedTemplatesMutable) {
		// A Job that ran keeps the template it ran with.
		return job
	}
	out := job.DeepCopy()
	out.Spec.Template = WithScheduling(job.Spec.Template, UserScheduling(job))
	return out
}

// NamespaceRecheck is how soon a Job a worker's namespace kept off that
// worker is placed again: jobferry watches no worker's namespaces, so
// nothing else says when its administrator accepts the manager's Jobs in
// one, creates it, or changes its Pod Security level (and reads of it are
// reused for up to workers' namespaceTTL).
const NamespaceRecheck = 30 * time.Second

// KeptOffByNamespace: the workers that could run the Job all rejected it
// for its namespace there, and nothing else (a Job some worker turned down
// for capacity is looked at again as capacity frees, namespaces and all).
func KeptOffByNamespace(d dispatch.Decision) bool {
	byNamespace := false
	for _, code := range d.Codes {
		switch code {
		case dispatch.ReasonNamespaceMissing, dispatch.ReasonNamespaceNotAccepted, dispatch.ReasonPodSecurity, dispatch.ReasonNamespaceUnreadable:
			byNamespace = true
		case dispatch.ReasonInsufficientCapacity, dispatch.ReasonNoCapacitySummary:
			return false
		}
	}
	return byNamespace
}

// NeedsActivation: placed and mirrored, but still held by the webhook.
func NeedsActivation(job *batchv1.Job) bool {
	return job.Annotations[v1alpha1.HeldForPlacementAnnotation] == "true"
}

// UserSuspended: suspended by its user rather than held for placement.
func UserSuspended(job *batchv1.Job) bool {
	return ptr.Deref(job.Spec.Suspend, false) && !NeedsActivation(job)
}
