package managercache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestTrimJobKeepsManagerJobsAndOthersAsIdentity(t *testing.T) {
	job := func(managedBy *string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "team", Name: "j", UID: "u1", ResourceVersion: "7",
				Labels: map[string]string{"app": "train", batchv1.ControllerUidLabel: "u1", "controller-uid": "u1",
					batchv1.JobNameLabel: "j", "job-name": "j"},
				Annotations:   map[string]string{v1alpha1.WorkerAnnotation: "worker-1"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			},
			Spec: batchv1.JobSpec{ManagedBy: managedBy, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u1"}}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
			Status: batchv1.JobStatus{Active: 1},
		}
	}
	got, err := trimJob(job(ptr.To(v1alpha1.ManagerManagedBy)))
	if err != nil {
		t.Fatal(err)
	}
	managed := got.(*batchv1.Job)
	if managed.ManagedFields != nil {
		t.Error("a manager Job keeps its managedFields in the cache")
	}
	if managed.Spec.Selector != nil {
		t.Error("a manager Job keeps its selector in the cache")
	}
	if diff := cmp.Diff(map[string]string{"app": "train"}, managed.Labels); diff != "" {
		t.Errorf("a manager Job's labels in the cache (-want +got):\n%s", diff)
	}
	unlabelled := job(ptr.To(v1alpha1.ManagerManagedBy))
	unlabelled.Labels = map[string]string{batchv1.ControllerUidLabel: "u1", batchv1.JobNameLabel: "j"}
	if got, err := trimJob(unlabelled); err != nil || got.(*batchv1.Job).Labels != nil {
		t.Errorf("a manager Job with the generated labels alone keeps %v in the cache (error %v)", got.(*batchv1.Job).Labels, err)
	}
	if managed.Annotations[v1alpha1.WorkerAnnotation] != "worker-1" || len(managed.Spec.Template.Spec.Containers) != 1 || managed.Status.Active != 1 {
		t.Errorf("a manager Job lost what the cache's readers read: %+v", managed)
	}

	got, err = trimJob(job(nil))
	if err != nil {
		t.Fatal(err)
	}
	other := got.(*batchv1.Job)
	if other.Name != "j" || other.Namespace != "team" || other.UID != "u1" || other.ResourceVersion != "7" {
		t.Errorf("another controller's Job lost its identity: %+v", other.ObjectMeta)
	}
	if v1alpha1.IsManagerJob(other) {
		t.Error("another controller's Job passes for a manager Job once trimmed")
	}
	if other.Annotations != nil || other.Spec.Template.Spec.Containers != nil || other.Status.Active != 0 || other.ManagedFields != nil {
		t.Errorf("another controller's Job keeps what no reader needs: %+v", other)
	}
}

func TestPlacementKeyTellsUnplacedFromPlaced(t *testing.T) {
	placed := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-2"}}}
	if got := placementKey(placed); got != "worker-2" {
		t.Errorf("placed Job indexed as %q", got)
	}
	if got := placementKey(&batchv1.Job{}); got != UnplacedKey {
		t.Errorf("unplaced Job indexed as %q, want %q", got, UnplacedKey)
	}
}

// A cached manager Job keeps of its pod template what placement, the
// dispatch policy's Pod Security check and the mirror's template comparison
// read, and drops what only the mirror's creation needs.
func TestTrimTemplateKeepsWhatTheCacheReadersRead(t *testing.T) {
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "train", batchv1.ControllerUidLabel: "u1", "controller-uid": "u1", batchv1.JobNameLabel: "j", "job-name": "j"},
			Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "gpu"},
			Tolerations:  []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}}},
			InitContainers: []corev1.Container{{Name: "sidecar", Image: "registry.example/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.example/train:1", ImagePullPolicy: corev1.PullAlways, Command: []string{"train"}, Args: []string{"--epochs=3"},
				WorkingDir: "/w", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}, EnvFrom: []corev1.EnvFromSource{{Prefix: "P"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}, LivenessProbe: &corev1.Probe{}, Lifecycle: &corev1.Lifecycle{},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Ports:           []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			}},
		},
	}
	trimmed := *template.DeepCopy()
	trimTemplate(&trimmed)

	if diff := cmp.Diff(map[string]string{"app": "train"}, trimmed.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	// What the readers read stays as it was.
	kept := func(p corev1.PodTemplateSpec) any {
		c, i := p.Spec.Containers[0], p.Spec.InitContainers[0]
		return []any{p.Annotations, p.Spec.NodeSelector, p.Spec.Tolerations, p.Spec.Volumes, c.Name, c.Ports, c.SecurityContext, c.Resources, i.Name, i.RestartPolicy, i.Resources}
	}
	if diff := cmp.Diff(kept(template), kept(trimmed)); diff != "" {
		t.Errorf("the trim changed what the cache's readers read (-before +after):\n%s", diff)
	}
	want := corev1.Container{Name: "c", Ports: template.Spec.Containers[0].Ports, SecurityContext: template.Spec.Containers[0].SecurityContext,
		Resources: template.Spec.Containers[0].Resources}
	if diff := cmp.Diff(want, trimmed.Spec.Containers[0]); diff != "" {
		t.Errorf("container (-want +got):\n%s", diff)
	}
	if trimmed.Spec.InitContainers[0].Image != "" {
		t.Errorf("an init container keeps its image")
	}
}
