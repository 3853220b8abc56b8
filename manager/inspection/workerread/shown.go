package workerread

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/mirror"
)

// What an inspection shows of a worker's objects: what `kubectl describe`
// and `kubectl get` print of them, each string and list cut to a bound, so
// that an answer's size depends on how many objects it shows and never on
// what a worker's users wrote into them (a pod's env, its annotations, a
// status message of a megabyte). The bounds:
const (
	// MaxWord bounds a reason, type, node, a container state's message.
	MaxWord = 256
	// MaxMessage bounds a pod's, a condition's or an Event's message.
	MaxMessage = 1 << 10
	// MaxContainers bounds a pod's containers shown (their names are what
	// a log request may name) and MaxStatuses its conditions and its
	// containers' statuses.
	MaxContainers = 16
	MaxStatuses   = 8
	// MaxIndexes bounds a Job's completed and failed indexes as shown.
	MaxIndexes = 4 << 10
	// MaxShownPodBytes, MaxShownEventBytes: the most a pod and an Event
	// take as shown, encoded (TestShownObjectsAreBounded).
	MaxShownPodBytes   = 64 << 10
	MaxShownEventBytes = 6 << 10
)

func word(s string) string    { return cachebudget.Cut(s, MaxWord) }
func message(s string) string { return cachebudget.Cut(s, MaxMessage) }

// name bounds an object's name as the API server does (a name of a
// reference, which it does not check, too); containerName a container's.
func name(s string) string          { return cachebudget.Cut(s, validation.DNS1123SubdomainMaxLength) }
func containerName(s string) string { return cachebudget.Cut(s, validation.DNS1123LabelMaxLength) }

// shownMeta is an object's identity: no labels, annotations or managed
// fields.
func shownMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: name(m.Namespace), Name: name(m.Name), UID: types.UID(word(string(m.UID))),
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// ShownJob is a Job (the mirror) as an inspection shows it: its identity
// with jobferry's identity labels, its spec's counts and its status, the
// pod template left out.
func ShownJob(j *batchv1.Job) *batchv1.Job {
	out := &batchv1.Job{ObjectMeta: shownMeta(&j.ObjectMeta)}
	for _, k := range mirror.IdentityLabelKeys {
		if v, ok := j.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = word(v)
		}
	}
	s := &j.Spec
	out.Spec = batchv1.JobSpec{Parallelism: s.Parallelism, Completions: s.Completions, BackoffLimit: s.BackoffLimit,
		Suspend: s.Suspend, CompletionMode: s.CompletionMode, ActiveDeadlineSeconds: s.ActiveDeadlineSeconds}
	if s.ManagedBy != nil {
		managedBy := word(*s.ManagedBy)
		out.Spec.ManagedBy = &managedBy
	}
	st := &j.Status
	out.Status = batchv1.JobStatus{StartTime: st.StartTime, CompletionTime: st.CompletionTime,
		Active: st.Active, Succeeded: st.Succeeded, Failed: st.Failed, Terminating: st.Terminating, Ready: st.Ready,
		CompletedIndexes: cachebudget.Cut(st.CompletedIndexes, MaxIndexes)}
	if st.FailedIndexes != nil {
		failed := cachebudget.Cut(*st.FailedIndexes, MaxIndexes)
		out.Status.FailedIndexes = &failed
	}
	for _, c := range st.Conditions[:min(len(st.Conditions), MaxStatuses)] {
		out.Status.Conditions = append(out.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobConditionType(word(string(c.Type))),
			Status: corev1.ConditionStatus(word(string(c.Status))), Reason: word(c.Reason), Message: message(c.Message),
			LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime})
	}
	return out
}

// ShownPod is a pod as an inspection shows it: its identity, node, phase,
// conditions, and its containers' names and states (no env, no volumes,
// no images' pull secrets: none of the spec but the names).
func ShownPod(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{ObjectMeta: shownMeta(&p.ObjectMeta)}
	out.Spec.NodeName = word(p.Spec.NodeName)
	out.Spec.InitContainers = shownContainers(p.Spec.InitContainers)
	out.Spec.Containers = shownContainers(p.Spec.Containers)
	st := &p.Status
	out.Status = corev1.PodStatus{Phase: corev1.PodPhase(word(string(st.Phase))), Reason: word(st.Reason), Message: message(st.Message),
		StartTime: st.StartTime, InitContainerStatuses: shownStatuses(st.InitContainerStatuses), ContainerStatuses: shownStatuses(st.ContainerStatuses)}
	for _, c := range st.Conditions[:min(len(st.Conditions), MaxStatuses)] {
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(word(string(c.Type))),
			Status: corev1.ConditionStatus(word(string(c.Status))), Reason: word(c.Reason), Message: message(c.Message),
			LastTransitionTime: c.LastTransitionTime})
	}
	return out
}

func shownContainers(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs[:min(len(cs), MaxContainers)] {
		out = append(out, corev1.Container{Name: containerName(c.Name)})
	}
	return out
}

func shownStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range ss[:min(len(ss), MaxStatuses)] {
		out = append(out, corev1.ContainerStatus{Name: containerName(s.Name), Ready: s.Ready, RestartCount: s.RestartCount, Started: s.Started,
			State: shownState(s.State), LastTerminationState: shownLastState(s.LastTerminationState)})
	}
	return out
}

func shownState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if w := s.Waiting; w != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: word(w.Reason), Message: word(w.Message)}
	}
	if r := s.Running; r != nil {
		out.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: word(t.Reason),
			Message: word(t.Message), StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
	}
	return out
}

// shownLastState is how a container last ended: its reason and exit code.
func shownLastState(s corev1.ContainerState) corev1.ContainerState {
	if t := s.Terminated; t != nil {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: word(t.Reason),
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}}
	}
	return corev1.ContainerState{}
}

// ShownEvent is an Event as an inspection shows it: what `kubectl
// describe` prints of it.
func ShownEvent(e *corev1.Event) corev1.Event {
	about := &e.InvolvedObject
	out := corev1.Event{ObjectMeta: shownMeta(&e.ObjectMeta),
		InvolvedObject: corev1.ObjectReference{Kind: word(about.Kind), Namespace: name(about.Namespace), Name: name(about.Name),
			UID: types.UID(word(string(about.UID))), FieldPath: word(about.FieldPath)},
		Reason: word(e.Reason), Message: message(e.Message), Type: word(e.Type), Count: e.Count, Action: word(e.Action),
		Source:         corev1.EventSource{Component: word(e.Source.Component), Host: word(e.Source.Host)},
		FirstTimestamp: e.FirstTimestamp, LastTimestamp: e.LastTimestamp, EventTime: e.EventTime,
		ReportingController: word(e.ReportingController)}
	if s := e.Series; s != nil {
		out.Series = &corev1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return out
}
