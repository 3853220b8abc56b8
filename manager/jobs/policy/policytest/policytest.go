// Package policytest holds the manager Jobs, mirrors and states the tests of
// the Job controller and its policy decide on: one home for the fixtures of
// both packages. Only tests import it.
package policytest

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

var Now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

var Config = policy.Config{Origin: "jobferry", ManagerID: "manager-a", WorkerLostTimeout: 15 * time.Minute, StatusBatchPeriod: time.Second}

// Job is a manager Job as the webhook admits it: held for placement.
func Job(mutate ...func(*batchv1.Job)) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "uid-1",
			Annotations: map[string]string{v1alpha1.HeldForPlacementAnnotation: "true"}},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true),
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "example/work:1"}}}},
		},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// Placed is a Job as PlacedJob leaves it on worker w1.
func Placed(job *batchv1.Job) {
	job.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	job.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	delete(job.Annotations, v1alpha1.HeldForPlacementAnnotation)
	job.Spec.Suspend = ptr.To(false)
}

func Running(job *batchv1.Job) {
	job.Status.StartTime = &metav1.Time{Time: Now.Add(-time.Minute)}
	job.Status.Active = 1
	job.Status.Ready = ptr.To[int32](1)
	job.Status.Terminating = ptr.To[int32](0)
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
}

func Complete(job *batchv1.Job) {
	at := metav1.NewTime(Now.Add(-time.Second))
	job.Status.StartTime = &metav1.Time{Time: Now.Add(-time.Minute)}
	job.Status.CompletionTime = &at
	job.Status.Active, job.Status.Succeeded = 0, 1
	job.Status.Ready, job.Status.Terminating = ptr.To[int32](0), ptr.To[int32](0)
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastProbeTime: at, LastTransitionTime: at},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastProbeTime: at, LastTransitionTime: at},
	}
}

// MirrorOf is the mirror of job as the worker shows it, with the worker's
// status applied by mutate.
func MirrorOf(t *testing.T, job *batchv1.Job, mutate ...func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	m, err := policy.DesiredMirror(job, policy.NeedsActivation(job), WorkerCluster(), Config.Origin, Config.ManagerID)
	if err != nil {
		t.Fatal(err)
	}
	m.UID = "mirror-uid"
	m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "mirror-uid"}}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func WorkerCluster(mutate ...func(*v1alpha1.WorkerCluster)) *v1alpha1.WorkerCluster {
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}
	for _, f := range mutate {
		f(wc)
	}
	return wc
}

func DisconnectedFor(d time.Duration) func(*v1alpha1.WorkerCluster) {
	return func(wc *v1alpha1.WorkerCluster) {
		wc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionConnected, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonUnreachable, LastTransitionTime: metav1.NewTime(Now.Add(-d))}}
	}
}

// ConnectedState is the state of a Job Placed on w1, which is connected.
func ConnectedState(job *batchv1.Job, m *batchv1.Job) policy.State {
	s := policy.State{Job: job, Now: Now, Worker: "w1", WorkerCluster: WorkerCluster(),
		Connection: policy.Connection{Connected: true, MayUse: true, StartedTemplatesMutable: true, KubernetesVersion: "v1.36.3"}, Mirror: m}
	if m != nil {
		s.MirrorUID = m.UID
	}
	return s
}

// Queued names a LocalQueue on the Job.
func Queued(job *batchv1.Job) {
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[workload.NameLabel] = "team"
}

// QueuedPlaced is a Queued Job as PlacedQueuedJob leaves it on w1: Placed,
// still suspended (Kueue unsuspends it).
func QueuedPlaced(job *batchv1.Job) {
	job.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	job.Annotations[v1alpha1.DispatchAttemptAnnotation] = "1"
	delete(job.Annotations, v1alpha1.HeldForPlacementAnnotation)
}

func Unsuspended(job *batchv1.Job) { job.Spec.Suspend = ptr.To(false) }

// WorkloadView is the View of a Queued Job's Workload job-train-1, with
// jobferry's check "dispatch" Pending, as mutated.
func WorkloadView(mutate ...func(*workload.View)) *workload.View {
	v := &workload.View{Queue: "team", Workload: "job-train-1", PodSets: []kueue.PodSetReference{kueue.DefaultPodSetName},
		Check: "dispatch", State: kueue.CheckStatePending, ChecksListed: true}
	for _, m := range mutate {
		m(v)
	}
	return v
}

func Reserved(v *workload.View) { v.QuotaReserved = true }

func Admitted(v *workload.View) { v.Admitted = true }

func Evicted(v *workload.View) { v.Evicted = true }

func Deactivated(v *workload.View) { v.Deactivated, v.Why = true, "spec.active is false" }

// WithoutCheck: the Workload lists checks, none of them jobferry's.
func WithoutCheck(v *workload.View) { v.Check, v.State = "", "" }

// ChecksNotListed: Kueue has not listed the ClusterQueue's checks yet.
func ChecksNotListed(v *workload.View) { v.Check, v.State, v.ChecksListed = "", "", false }

func CheckState(state kueue.CheckState) func(*workload.View) {
	return func(v *workload.View) { v.State = state }
}

// QueuedState is the state of an unplaced Queued Job; nil v: Kueue made no
// Workload yet.
func QueuedState(job *batchv1.Job, v *workload.View) policy.State {
	if v == nil {
		v = &workload.View{Queue: "team"}
	}
	return policy.State{Job: job, Now: Now, Queue: v, KueueMode: true, RecordedQueue: v.Queue}
}

// QueuedPlacedState is the state of a Queued Job Placed on w1, which is
// connected.
func QueuedPlacedState(job, m *batchv1.Job, v *workload.View) policy.State {
	s := ConnectedState(job, m)
	s.Queue, s.KueueMode, s.RecordedQueue = v, true, v.Queue
	return s
}
