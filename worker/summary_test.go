package worker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func res(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func node(name string, labels map[string]string, ready bool, mods ...func(*corev1.Node)) corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Allocatable: res("cpu", "4", "pods", "10"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func pod(nodeName string, phase corev1.PodPhase, cpu string, mods ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: res("cpu", cpu)},
		}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func TestSummarize(t *testing.T) {
	taint := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	withTaint := func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{taint} }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	gpu := map[string]string{"pool": "gpu", "zone": "a", "kubernetes.io/hostname": "g0"}

	cases := map[string]struct {
		nodes []corev1.Node
		pods  []corev1.Pod
		want  []v1alpha1.NodePool
	}{
		"nothing": {want: []v1alpha1.NodePool{}},
		"nodes are grouped by the pool label; shared labels and taints only": {
			nodes: []corev1.Node{
				node("g0", gpu, true, withTaint),
				node("g1", map[string]string{"pool": "gpu", "zone": "b", "kubernetes.io/hostname": "g1"}, true, withTaint),
				node("n0", map[string]string{"pool": "general"}, true),
				node("n1", map[string]string{"pool": "general"}, true, withTaint),
			},
			want: []v1alpha1.NodePool{
				{Name: "general", Nodes: 2, Labels: map[string]string{"pool": "general"},
					Allocatable: res("cpu", "8", "pods", "20"), Requested: res(), Free: res("cpu", "8", "pods", "20")},
				{Name: "gpu", Nodes: 2, Labels: map[string]string{"pool": "gpu"}, Taints: []corev1.Taint{taint},
					Allocatable: res("cpu", "8", "pods", "20"), Requested: res(), Free: res("cpu", "8", "pods", "20")},
			},
		},
		"not-ready and cordoned nodes do not count; unlabelled nodes form the default pool": {
			nodes: []corev1.Node{
				node("n0", map[string]string{"pool": "general"}, false),
				node("n1", map[string]string{"pool": "general"}, true, cordoned),
				node("x", map[string]string{}, true),
			},
			want: []v1alpha1.NodePool{{Name: UnlabelledPool, Nodes: 1, Labels: map[string]string{},
				Allocatable: res("cpu", "4", "pods", "10"), Requested: res(), Free: res("cpu", "4", "pods", "10")}},
		},
		"running, pending and terminating pods are requested; finished and unscheduled pods are not": {
			nodes: []corev1.Node{node("n0", map[string]string{"pool": "general"}, true)},
			pods: []corev1.Pod{
				pod("n0", corev1.PodRunning, "1"),
				pod("n0", corev1.PodPending, "500m"),
				pod("n0", corev1.PodRunning, "1", terminating),
				pod("n0", corev1.PodSucceeded, "1"),
				pod("n0", corev1.PodFailed, "1"),
				pod("", corev1.PodPending, "1"),
				pod("elsewhere", corev1.PodRunning, "1"),
			},
			want: []v1alpha1.NodePool{{Name: "general", Nodes: 1, Labels: map[string]string{"pool": "general"},
				Allocatable: res("cpu", "4", "pods", "10"), Requested: res("cpu", "2500m", "pods", "3"), Free: res("cpu", "1500m", "pods", "7")}},
		},
		"free never goes below zero": {
			nodes: []corev1.Node{node("n0", map[string]string{"pool": "general"}, true)},
			pods:  []corev1.Pod{pod("n0", corev1.PodRunning, "6")},
			want: []v1alpha1.NodePool{{Name: "general", Nodes: 1, Labels: map[string]string{"pool": "general"},
				Allocatable: res("cpu", "4", "pods", "10"), Requested: res("cpu", "6", "pods", "1"), Free: res("cpu", "0", "pods", "9")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Summarize(tc.nodes, tc.pods, "pool")
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
		})
	}
}
