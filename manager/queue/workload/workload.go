// Package workload is what jobferry reads of a queued Job's Kueue Workload
// and what it writes into its admission check there, as pure values: the
// Job controller's policy decides on a View and answers with a
// CheckUpdate; package queue reads the Workload and applies the update.
package workload

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// NameLabel names the LocalQueue of a Job (Kueue's label; its constants
// package is not an API package, so it is not imported).
const NameLabel = v1alpha1.KueueQueueNameLabel

// maxTolerations is how many tolerations a pod set update may carry
// (Kueue's validation).
const maxTolerations = 8

// QueueName is the LocalQueue a Job names; "" when it names none (it is
// dispatched without Kueue).
func QueueName(job *batchv1.Job) string { return job.Labels[NameLabel] }

// View is what the Job controller knows of a queued Job's Workload.
type View struct {
	// Queue is the LocalQueue the Job names.
	Queue string
	// Workload is the name of the Job's Workload; "" while Kueue has not
	// made one. Version is its resourceVersion, as read.
	Workload, Version string
	// PodSets are the Workload's pod set names, for the pod set updates.
	PodSets []kueue.PodSetReference
	// QuotaReserved: Kueue reserved quota for the Workload.
	QuotaReserved bool
	// Admitted: quota reserved and every admission check Ready.
	Admitted bool
	// Evicted: Kueue is taking the quota back (evicted, preempted,
	// deactivated, a check Retry); the quota may still show reserved until
	// the Job stopped, and the checks are Pending again already.
	Evicted bool
	// Deactivated: the Workload is not queued (spec.active false: an
	// administrator's, or Kueue's after a check Rejected it); Why says why.
	Deactivated bool
	Why         string
	// Check is jobferry's admission check on the Workload ("" when its
	// ClusterQueue names none of jobferry's: Kueue then admits without it).
	Check string
	// ChecksListed: the Workload lists admission checks (any). Kueue lists
	// its ClusterQueue's checks on a Workload a moment after making it,
	// and may reserve quota before it has.
	ChecksListed bool
	// State and Message are the check's.
	State   kueue.CheckState
	Message string
	// Updates are the pod set updates the check carries.
	Updates []kueue.PodSetUpdate
}

// ViewOf summarises the Workload wl of a Job queued in queueName for the
// Job controller; ours says which admission check names are jobferry's.
// A nil wl is a Workload Kueue has not made yet.
func ViewOf(queueName string, wl *kueue.Workload, ours map[string]bool) View {
	v := View{Queue: queueName}
	if wl == nil {
		return v
	}
	v.Workload, v.Version = wl.Name, wl.ResourceVersion
	for _, ps := range wl.Spec.PodSets {
		v.PodSets = append(v.PodSets, ps.Name)
	}
	v.QuotaReserved = meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	v.Admitted = meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	v.Evicted = meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)
	if !ptr.Deref(wl.Spec.Active, true) {
		v.Deactivated, v.Why = true, "spec.active is false"
		if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
			v.Why = c.Message
		}
	}
	v.ChecksListed = len(wl.Status.AdmissionChecks) > 0
	for _, c := range wl.Status.AdmissionChecks {
		if ours[string(c.Name)] {
			v.Check, v.State, v.Message, v.Updates = string(c.Name), c.State, c.Message, c.PodSetUpdates
			break
		}
	}
	return v
}

// Current picks a Job's Workload among those it controls: the one Kueue
// works on is the unfinished one (a finished one of an earlier run may
// linger until Kueue collects it); nil when there is none.
func Current(owned []kueue.Workload) *kueue.Workload {
	var pick *kueue.Workload
	for i := range owned {
		wl := &owned[i]
		if wl.DeletionTimestamp != nil {
			continue
		}
		finished := meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
		if pick == nil || (!finished && meta.IsStatusConditionTrue(pick.Status.Conditions, kueue.WorkloadFinished)) {
			pick = wl
		}
	}
	return pick
}

// CheckUpdate is the state jobferry gives its check on a Workload.
type CheckUpdate struct {
	State   kueue.CheckState
	Message string
	// Updates go with Ready: the worker's directives for the Job's pods.
	Updates []kueue.PodSetUpdate
	// RequeueAfterSeconds goes with Retry: how long Kueue waits before
	// trying the Workload again.
	RequeueAfterSeconds *int32
}

// Unchanged reports whether the check already has u's state and pod set
// updates, so it is not written again (the message may say more than the
// decision, as when a placement's reasons are known).
func (u CheckUpdate) Unchanged(v View) bool {
	return v.State == u.State && equalUpdates(v.Updates, u.Updates)
}

// Applied is v as it reads once the check has u's state, message and pod
// set updates.
func (u CheckUpdate) Applied(v View) View {
	v.State, v.Message, v.Updates = u.State, u.Message, u.Updates
	return v
}

func equalUpdates(a, b []kueue.PodSetUpdate) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// PlacementUpdates are the pod set updates that report a placement on
// worker: its nodeSelector and tolerations for every pod set, and the
// worker named in an annotation of the pods. Node affinity has no place in a
// pod set update: it goes into the mirror only (as every directive does,
// mirror.Build), as do tolerations beyond what an update may carry.
func PlacementUpdates(podSets []kueue.PodSetReference, worker string, d v1alpha1.SchedulingDirectives) []kueue.PodSetUpdate {
	if len(podSets) == 0 {
		podSets = []kueue.PodSetReference{kueue.DefaultPodSetName}
	}
	var out []kueue.PodSetUpdate
	for _, name := range podSets {
		u := kueue.PodSetUpdate{Name: name, Annotations: map[string]string{v1alpha1.WorkerAnnotation: worker}}
		if len(d.NodeSelector) > 0 {
			u.NodeSelector = maps.Clone(d.NodeSelector)
		}
		if n := len(d.Tolerations); n > 0 && n <= maxTolerations {
			u.Tolerations = slices.Clone(d.Tolerations)
		}
		out = append(out, u)
	}
	return out
}

// Changed reports whether a Workload changed in what the Job controller
// decides on (ViewOf): its pod sets, whether quota is reserved, whether it
// is admitted, evicted or finished, and its admission checks' states and
// pod set updates. Kueue rewrites a pending Workload's conditions on every
// scheduling attempt (why it does not fit yet); with thousands queued,
// reconciling their Jobs for that would starve the ones Kueue just
// admitted.
func Changed(before, after *kueue.Workload) bool {
	if !slices.EqualFunc(before.Spec.PodSets, after.Spec.PodSets, func(a, b kueue.PodSet) bool { return a.Name == b.Name }) ||
		ptr.Deref(before.Spec.Active, true) != ptr.Deref(after.Spec.Active, true) {
		return true
	}
	for _, t := range []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadEvicted, kueue.WorkloadFinished} {
		if meta.IsStatusConditionTrue(before.Status.Conditions, t) != meta.IsStatusConditionTrue(after.Status.Conditions, t) {
			return true
		}
	}
	return !slices.EqualFunc(before.Status.AdmissionChecks, after.Status.AdmissionChecks, func(a, b kueue.AdmissionCheckState) bool {
		return a.Name == b.Name && a.State == b.State && a.Message == b.Message && equalUpdates(a.PodSetUpdates, b.PodSetUpdates)
	})
}
