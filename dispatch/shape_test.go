package dispatch

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch/dispatchtest"
)

// Each thing Place reads of a Job changes its shape; what it does not read
// leaves the shape alone, so Jobs differing only there share a queue.
func TestShapeCoversWhatPlaceReads(t *testing.T) {
	base := func() *batchv1.Job {
		return job("1", 2, func(j *batchv1.Job) {
			j.Namespace, j.Name = "team-a", "train"
			j.Spec.Completions = ptr.To[int32](4)
			j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: "zone=a", v1alpha1.ExcludedWorkersAnnotation: "w9"}
		})
	}
	annotate := func(key, value string) func(*batchv1.Job) {
		return func(j *batchv1.Job) { j.Annotations[key] = value }
	}
	podSpec := func(f func(*corev1.PodSpec)) func(*batchv1.Job) {
		return func(j *batchv1.Job) { f(&j.Spec.Template.Spec) }
	}
	reads := map[string]func(*batchv1.Job){
		"namespace":        func(j *batchv1.Job) { j.Namespace = "team-b" },
		"cluster selector": annotate(v1alpha1.ClusterSelectorAnnotation, "zone=b"),
		"excluded workers": annotate(v1alpha1.ExcludedWorkersAnnotation, "w9,w1"),
		"parallelism":      func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) },
		"completions":      func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](1) },
		"container request": podSpec(func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}),
		"init container request": podSpec(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")}}}}
		}),
		"pod overhead":  podSpec(func(s *corev1.PodSpec) { s.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")} }),
		"node selector": podSpec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "gpu"} }),
		"node affinity": podSpec(func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}}}}}
		}),
		"tolerations": podSpec(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}),
		"a field kept only from some Kubernetes version on": dispatchtest.FeatureSamples["PodLevelResources"],
	}
	ignores := map[string]func(*batchv1.Job){
		"name":             func(j *batchv1.Job) { j.Name = "other" },
		"labels":           func(j *batchv1.Job) { j.Labels = map[string]string{"team": "x"} },
		"image":            podSpec(func(s *corev1.PodSpec) { s.Containers[0].Image = "other:2" }),
		"other annotation": annotate("example.com/note", "x"),
	}
	want := Shape(base())
	for name, mutate := range reads {
		j := base()
		mutate(j)
		if Shape(j) == want {
			t.Errorf("a Job with another %s has the same shape", name)
		}
	}
	for name, mutate := range ignores {
		j := base()
		mutate(j)
		if Shape(j) != want {
			t.Errorf("a Job with another %s has another shape", name)
		}
	}
}
