package chaos

import (
	"sort"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// ManagerCluster names the manager cluster in a History (workers go by their
// WorkerCluster names).
const ManagerCluster = "manager"

// Kind is the kind of object a Change is about.
type Kind string

const (
	KindJob      Kind = "Job"
	KindPod      Kind = "Pod"
	KindWorker   Kind = "WorkerCluster"
	KindWorkload Kind = "Workload"
)

// Change is one observed change of one object on one cluster, as a watch
// delivered it, with the facts the checker reads.
type Change struct {
	At        time.Time
	Cluster   string
	Kind      Kind
	Namespace string
	Name      string
	UID       types.UID
	// Deleted: the object is gone (its last facts are kept). Unseen: its
	// deletion happened while the watch was broken, so its last facts are
	// the last ones seen, maybe not its last ones.
	Deleted  bool
	Unseen   bool           `json:",omitempty"`
	Job      *JobFacts      `json:",omitempty"`
	Pod      *PodFacts      `json:",omitempty"`
	Worker   *WorkerFacts   `json:",omitempty"`
	Workload *WorkloadFacts `json:",omitempty"`
}

// JobFacts are what the checker reads of a Job, a manager Job or a mirror.
type JobFacts struct {
	// A mirror's manager Job and dispatch attempt (its labels).
	OriginUID types.UID `json:",omitempty"`
	Attempt   int       `json:",omitempty"`
	// A manager Job's shape in the workload (ShapeLabel), its worker and
	// recorded mirror (its annotations), and its dispatch attempt.
	Shape     string    `json:",omitempty"`
	Worker    string    `json:",omitempty"`
	MirrorUID types.UID `json:",omitempty"`

	Suspend                  bool   `json:",omitempty"`
	Indexed                  bool   `json:",omitempty"`
	ReplaceOnlyFailed        bool   `json:",omitempty"`
	Completions, Parallelism int32  `json:",omitempty"`
	Active, Succeeded        int32  `json:",omitempty"`
	Failed                   int32  `json:",omitempty"`
	CompletedIndexes         string `json:",omitempty"`
	// Terminal is Complete, Failed, or empty; BothTerminal when a Job
	// carries both conditions.
	Terminal     batchv1.JobConditionType `json:",omitempty"`
	BothTerminal bool                     `json:",omitempty"`
	Deleting     bool                     `json:",omitempty"`
}

// PodFacts are what the checker reads of a pod of a mirror.
type PodFacts struct {
	JobUID   types.UID
	Index    string          `json:",omitempty"`
	Phase    corev1.PodPhase `json:",omitempty"`
	Deleting bool            `json:",omitempty"`
}

// Live: the pod may still run (not in a terminal phase, deleted or not).
func (p *PodFacts) Live() bool {
	return p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed
}

// WorkerFacts are a WorkerCluster's connection as the manager published it.
type WorkerFacts struct {
	Connected bool
	Reason    string `json:",omitempty"`
}

// WorkloadFacts are what the checker reads of a Kueue Workload (Kueue mode).
type WorkloadFacts struct {
	// JobUID is the manager Job it queues.
	JobUID       types.UID
	ClusterQueue string `json:",omitempty"`
	// Reserved: it holds quota (QuotaReserved); Admitted: and every
	// admission check (jobferry's among them) is Ready; Finished: its
	// Job finished, and it holds nothing.
	Reserved, Admitted, Finished bool `json:",omitempty"`
	// CPU is the quota it holds, in millicores (its pod sets' usage).
	CPU int64 `json:",omitempty"`
	// AdmittedSince is when the API server says it was admitted (Admitted's
	// lastTransitionTime, to the second); ReleasedSince when it says it
	// stopped holding quota (Finished's, or QuotaReserved's once False). A
	// watch that lags (its API server restarted) delivers changes late,
	// and may skip states: these say when they happened.
	AdmittedSince time.Time `json:",omitzero"`
	ReleasedSince time.Time `json:",omitzero"`
}

// Holds is the quota the Workload holds now, in millicores.
func (w *WorkloadFacts) Holds() int64 {
	if w.Reserved && !w.Finished {
		return w.CPU
	}
	return 0
}

// WorkloadFactsOf reads a Workload's facts.
func WorkloadFactsOf(wl *kueue.Workload) *WorkloadFacts {
	f := &WorkloadFacts{
		Reserved: meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved),
		Admitted: meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted),
		Finished: meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished),
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		f.AdmittedSince = c.LastTransitionTime.Time
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		f.ReleasedSince = c.LastTransitionTime.Time
	} else if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionFalse {
		f.ReleasedSince = c.LastTransitionTime.Time
	}
	if owner := metav1.GetControllerOf(wl); owner != nil && owner.Kind == "Job" {
		f.JobUID = owner.UID
	}
	if a := wl.Status.Admission; a != nil {
		f.ClusterQueue = string(a.ClusterQueue)
		for _, ps := range a.PodSetAssignments {
			if cpu, ok := ps.ResourceUsage[corev1.ResourceCPU]; ok {
				f.CPU += cpu.MilliValue()
			}
		}
	}
	return f
}

// JobFactsOf reads a Job's facts (a manager Job's or a mirror's).
func JobFactsOf(job *batchv1.Job) *JobFacts {
	f := &JobFacts{
		OriginUID:         types.UID(job.Labels[v1alpha1.OriginUIDLabel]),
		Shape:             job.Labels[ShapeLabel],
		Worker:            job.Annotations[v1alpha1.WorkerAnnotation],
		MirrorUID:         types.UID(job.Annotations[v1alpha1.MirrorUIDAnnotation]),
		Suspend:           ptr.Deref(job.Spec.Suspend, false),
		Indexed:           ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion,
		ReplaceOnlyFailed: ptr.Deref(job.Spec.PodReplacementPolicy, "") == batchv1.Failed,
		Completions:       ptr.Deref(job.Spec.Completions, 1),
		Parallelism:       ptr.Deref(job.Spec.Parallelism, 1),
		Active:            job.Status.Active,
		Succeeded:         job.Status.Succeeded,
		Failed:            job.Status.Failed,
		CompletedIndexes:  job.Status.CompletedIndexes,
		Deleting:          job.DeletionTimestamp != nil,
	}
	attempt := job.Labels[v1alpha1.DispatchAttemptLabel]
	if f.OriginUID == "" {
		attempt = job.Annotations[v1alpha1.DispatchAttemptAnnotation]
	}
	f.Attempt, _ = strconv.Atoi(attempt)
	complete := conditionTrue(job, batchv1.JobComplete)
	failed := conditionTrue(job, batchv1.JobFailed)
	switch {
	case complete && failed:
		f.Terminal, f.BothTerminal = batchv1.JobComplete, true
	case complete:
		f.Terminal = batchv1.JobComplete
	case failed:
		f.Terminal = batchv1.JobFailed
	}
	return f
}

func conditionTrue(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// PodFactsOf reads a pod's facts; nil when no Job controls it.
func PodFactsOf(pod *corev1.Pod) *PodFacts {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" {
		return nil
	}
	return &PodFacts{
		JobUID:   owner.UID,
		Index:    pod.Labels[batchv1.JobCompletionIndexAnnotation],
		Phase:    pod.Status.Phase,
		Deleting: pod.DeletionTimestamp != nil,
	}
}

// WorkerFactsOf reads a WorkerCluster's Connected condition.
func WorkerFactsOf(wc *v1alpha1.WorkerCluster) *WorkerFacts {
	c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionConnected)
	if c == nil {
		return &WorkerFacts{}
	}
	return &WorkerFacts{Connected: c.Status == metav1.ConditionTrue, Reason: c.Reason}
}

// History is every recorded Change, safe to append to from several watches.
type History struct {
	mu      sync.Mutex
	changes []Change
}

// Add records a change.
func (h *History) Add(c Change) {
	h.mu.Lock()
	h.changes = append(h.changes, c)
	h.mu.Unlock()
}

// Changes returns a copy of the changes in the order of their times.
func (h *History) Changes() []Change {
	h.mu.Lock()
	out := append([]Change(nil), h.changes...)
	h.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}
