package managercache

import (
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// cachedJob is what the manager cluster's cache keeps of a Job (trimJob):
// its metadata, its spec without the selector and with the pod template
// reduced to what the cache's readers read (cachedTemplate), its status. A
// type of its own rather than a trimmed batchv1.Job, as the workers'
// mirror caches keep theirs: the manager holds one per tracked Job, and a
// batchv1.Job costs 1,408 bytes of struct and a container 416 however
// little of them is set; this is under half of that (issue 27).
//
// The cache's readers see Jobs all the same: a Get or a List through the
// cache copies the Job out (DeepCopyObject gives the Job this one stands
// for), and the cache's event handlers read it through
// JobWithoutTemplate. A List that skips the copy (UnsafeDisableDeepCopy)
// cannot hand it out as a Job, and fails.
type cachedJob struct {
	metav1.ObjectMeta
	spec   cachedJobSpec
	status batchv1.JobStatus
}

// cachedJobSpec is the Job's spec but its selector (a mirror gets its own
// from its worker's API server, and the manager's writes of the spec are
// patches of what changed).
type cachedJobSpec struct {
	parallelism, completions, ttlSecondsAfterFinished    *int32
	backoffLimit, backoffLimitPerIndex, maxFailedIndexes *int32
	activeDeadlineSeconds                                *int64
	podFailurePolicy                                     *batchv1.PodFailurePolicy
	successPolicy                                        *batchv1.SuccessPolicy
	manualSelector, suspend                              *bool
	completionMode                                       *batchv1.CompletionMode
	podReplacementPolicy                                 *batchv1.PodReplacementPolicy
	managedBy                                            *string
	// template is nil for a Job another controller manages: the cache
	// keeps its identity only.
	template *cachedTemplate
}

// cachedTemplate is what the cache's readers read of a manager Job's pod
// template, so the manager's memory does not grow with the size of its
// users' pod specs: placement (dispatch.Place: the requests, the node
// selector, affinity and tolerations the worker's directives merge with),
// the dispatch policy's Pod Security check (the security contexts, host
// namespaces, ports, volumes, probe and lifecycle hosts) and the comparison
// with the mirror's template (mirror.SpecUpdate: metadata and scheduling).
// Images, commands, environments and mounts are not among them: the mirror
// is built from the template as the API server holds it (a read at its
// creation), and the manager's writes of the spec are patches of what
// changed, which leave the rest be.
type cachedTemplate struct {
	labels, annotations, nodeSelector map[string]string
	affinity                          *corev1.Affinity
	tolerations                       []corev1.Toleration
	schedulingGates                   []corev1.PodSchedulingGate
	initContainers, containers        []cachedContainer
	// pod is nil when the pod spec sets none of its fields.
	pod *cachedPodFields
}

// cachedPodFields are the pod-level fields Pod Security and the pod's
// requests read (resourcehelper.PodRequests).
type cachedPodFields struct {
	hostNetwork, hostPID, hostIPC bool
	hostUsers                     *bool
	securityContext               *corev1.PodSecurityContext
	volumes                       []corev1.Volume
	ephemeralContainers           []corev1.EphemeralContainer
	os                            *corev1.PodOS
	overhead                      corev1.ResourceList
	resources                     *corev1.ResourceRequirements
	// resourceClaims and hostnameOverride are read by placement only for
	// whether the pod sets them (dispatch.VersionedFeatures).
	resourceClaims   []corev1.PodResourceClaim
	hostnameOverride *string
}

// cachedContainer is what the readers read of a container: its requests
// (and a sidecar's restart policy, which counts them among the pod's),
// its security context and ports, its probes and lifecycle hooks only
// when one of their handlers names a host (Pod Security's
// hostProbesAndLifecycle check; anything else in them only the worker
// reads), and its resize policy (placement reads whether there is one:
// dispatch.VersionedFeatures), which few containers set.
type cachedContainer struct {
	name            string
	resources       corev1.ResourceRequirements
	restartPolicy   *corev1.ContainerRestartPolicy
	securityContext *corev1.SecurityContext
	ports           []corev1.ContainerPort
	handlers        *containerHandlers
	rare            *rareContainerFields
}

// rareContainerFields are what the readers read of a container that few
// set: a pointer to them costs a container 8 bytes, not each field's own.
// Placement reads whether each is set (dispatch.VersionedFeatures): of the
// environment, only the variables read from a file are kept.
type rareContainerFields struct {
	resizePolicy       []corev1.ContainerResizePolicy
	restartPolicyRules []corev1.ContainerRestartRule
	envFromFiles       []corev1.EnvVar
}

type containerHandlers struct {
	liveness, readiness, startup *corev1.Probe
	lifecycle                    *corev1.Lifecycle
}

// newCachedManagerJob is a manager Job as the cache keeps it.
func newCachedManagerJob(job *batchv1.Job) *cachedJob {
	s := &job.Spec
	return &cachedJob{
		ObjectMeta: job.ObjectMeta,
		spec: cachedJobSpec{
			parallelism: s.Parallelism, completions: s.Completions, backoffLimit: s.BackoffLimit, backoffLimitPerIndex: s.BackoffLimitPerIndex,
			maxFailedIndexes: s.MaxFailedIndexes, ttlSecondsAfterFinished: s.TTLSecondsAfterFinished, activeDeadlineSeconds: s.ActiveDeadlineSeconds,
			podFailurePolicy: s.PodFailurePolicy, successPolicy: s.SuccessPolicy, manualSelector: s.ManualSelector, suspend: s.Suspend,
			completionMode: s.CompletionMode, podReplacementPolicy: s.PodReplacementPolicy, managedBy: s.ManagedBy,
			template: newCachedTemplate(&s.Template),
		},
		status: job.Status,
	}
}

func newCachedTemplate(t *corev1.PodTemplateSpec) *cachedTemplate {
	spec := &t.Spec
	c := &cachedTemplate{
		labels: t.Labels, annotations: t.Annotations,
		nodeSelector: spec.NodeSelector, affinity: spec.Affinity, tolerations: spec.Tolerations, schedulingGates: spec.SchedulingGates,
		initContainers: newCachedContainers(spec.InitContainers), containers: newCachedContainers(spec.Containers),
	}
	pod := cachedPodFields{
		hostNetwork: spec.HostNetwork, hostPID: spec.HostPID, hostIPC: spec.HostIPC, hostUsers: spec.HostUsers,
		securityContext: spec.SecurityContext, volumes: spec.Volumes, ephemeralContainers: spec.EphemeralContainers, os: spec.OS,
		overhead: spec.Overhead, resources: spec.Resources, resourceClaims: spec.ResourceClaims, hostnameOverride: spec.HostnameOverride,
	}
	// The API server gives every pod spec an empty security context: one
	// that sets nothing reads as none.
	if pod.securityContext != nil && reflect.ValueOf(*pod.securityContext).IsZero() {
		pod.securityContext = nil
	}
	if !reflect.ValueOf(pod).IsZero() {
		c.pod = &pod
	}
	return c
}

func newCachedContainers(containers []corev1.Container) []cachedContainer {
	if containers == nil {
		return nil
	}
	out := make([]cachedContainer, len(containers))
	for i := range containers {
		c := &containers[i]
		out[i] = cachedContainer{name: c.Name, resources: c.Resources, restartPolicy: c.RestartPolicy, securityContext: c.SecurityContext, ports: c.Ports}
		if namesHost(c) {
			out[i].handlers = &containerHandlers{liveness: c.LivenessProbe, readiness: c.ReadinessProbe, startup: c.StartupProbe, lifecycle: c.Lifecycle}
		}
		rare := rareContainerFields{resizePolicy: c.ResizePolicy, restartPolicyRules: c.RestartPolicyRules}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil {
				rare.envFromFiles = append(rare.envFromFiles, e)
			}
		}
		if rare.resizePolicy != nil || rare.restartPolicyRules != nil || rare.envFromFiles != nil {
			out[i].rare = &rare
		}
	}
	return out
}

// namesHost: one of the container's probes or lifecycle hooks sends its
// request to a host it names.
func namesHost(c *corev1.Container) bool {
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil && ((p.HTTPGet != nil && p.HTTPGet.Host != "") || (p.TCPSocket != nil && p.TCPSocket.Host != "")) {
			return true
		}
	}
	if c.Lifecycle == nil {
		return false
	}
	for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
		if h != nil && ((h.HTTPGet != nil && h.HTTPGet.Host != "") || (h.TCPSocket != nil && h.TCPSocket.Host != "")) {
			return true
		}
	}
	return false
}

// newCachedOtherJob is a Job another controller manages as the cache keeps
// it: what tells it apart (the Job controller skips it, see
// v1alpha1.IsManagerJob) and nothing else, as no reader needs more.
func newCachedOtherJob(job *batchv1.Job) *cachedJob {
	return &cachedJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: job.Name, UID: job.UID,
			ResourceVersion: job.ResourceVersion, Generation: job.Generation,
			CreationTimestamp: job.CreationTimestamp, DeletionTimestamp: job.DeletionTimestamp,
		},
		spec: cachedJobSpec{managedBy: job.Spec.ManagedBy},
	}
}

// jobKind is the type of every Job the cache gives back.
var jobKind = metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"}

// withoutTemplate is the Job, but its pod template, sharing the cache's
// maps, slices and pointers: to read, never to change.
func (c *cachedJob) withoutTemplate() batchv1.Job {
	s := &c.spec
	return batchv1.Job{
		TypeMeta:   jobKind,
		ObjectMeta: c.ObjectMeta,
		Spec: batchv1.JobSpec{
			Parallelism: s.parallelism, Completions: s.completions, BackoffLimit: s.backoffLimit, BackoffLimitPerIndex: s.backoffLimitPerIndex,
			MaxFailedIndexes: s.maxFailedIndexes, TTLSecondsAfterFinished: s.ttlSecondsAfterFinished, ActiveDeadlineSeconds: s.activeDeadlineSeconds,
			PodFailurePolicy: s.podFailurePolicy, SuccessPolicy: s.successPolicy, ManualSelector: s.manualSelector, Suspend: s.suspend,
			CompletionMode: s.completionMode, PodReplacementPolicy: s.podReplacementPolicy, ManagedBy: s.managedBy,
		},
		Status: c.status,
	}
}

// view is the Job the cache stands for, sharing the cache's maps, slices
// and pointers: to read, never to change.
func (c *cachedJob) view() batchv1.Job {
	job := c.withoutTemplate()
	if t := c.spec.template; t != nil {
		job.Spec.Template = t.view()
	}
	return job
}

func (t *cachedTemplate) view() corev1.PodTemplateSpec {
	out := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: t.labels, Annotations: t.annotations},
		Spec: corev1.PodSpec{
			NodeSelector: t.nodeSelector, Affinity: t.affinity, Tolerations: t.tolerations, SchedulingGates: t.schedulingGates,
			InitContainers: containerViews(t.initContainers), Containers: containerViews(t.containers),
		},
	}
	if p := t.pod; p != nil {
		s := &out.Spec
		s.HostNetwork, s.HostPID, s.HostIPC, s.HostUsers = p.hostNetwork, p.hostPID, p.hostIPC, p.hostUsers
		s.SecurityContext, s.Volumes, s.EphemeralContainers, s.OS = p.securityContext, p.volumes, p.ephemeralContainers, p.os
		s.Overhead, s.Resources, s.ResourceClaims, s.HostnameOverride = p.overhead, p.resources, p.resourceClaims, p.hostnameOverride
	}
	return out
}

func containerViews(cached []cachedContainer) []corev1.Container {
	if cached == nil {
		return nil
	}
	out := make([]corev1.Container, len(cached))
	for i := range cached {
		c := &cached[i]
		out[i] = corev1.Container{Name: c.name, Resources: c.resources, RestartPolicy: c.restartPolicy, SecurityContext: c.securityContext, Ports: c.ports}
		if h := c.handlers; h != nil {
			out[i].LivenessProbe, out[i].ReadinessProbe, out[i].StartupProbe, out[i].Lifecycle = h.liveness, h.readiness, h.startup, h.lifecycle
		}
		if r := c.rare; r != nil {
			out[i].ResizePolicy, out[i].RestartPolicyRules, out[i].Env = r.resizePolicy, r.restartPolicyRules, r.envFromFiles
		}
	}
	return out
}

// GetObjectKind makes cachedJob a runtime.Object, as the cache requires.
func (c *cachedJob) GetObjectKind() schema.ObjectKind {
	kind := jobKind
	return &kind
}

// DeepCopyObject is the Job this stands for, the caller's own: what the
// cache's Get and List hand out.
func (c *cachedJob) DeepCopyObject() runtime.Object {
	view := c.view()
	return view.DeepCopy()
}

// JobWithoutTemplate is obj (an object of the manager cluster's Job cache,
// as its event handlers get it: a cachedJob, a Job, or the tombstone of
// either) as a Job without its pod template, which no handler reads: its
// metadata, spec and status, sharing what the cache holds — to read, never
// to change. False when obj is none of them.
func JobWithoutTemplate(obj any) (batchv1.Job, bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *cachedJob:
		return o.withoutTemplate(), true
	case *batchv1.Job:
		job := *o
		job.Spec.Template = corev1.PodTemplateSpec{}
		return job, true
	}
	return batchv1.Job{}, false
}
