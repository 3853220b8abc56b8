package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodesFor(t *testing.T) {
	taint := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	type node struct {
		Name        string
		Labels      map[string]string
		Taints      []corev1.Taint
		Allocatable corev1.ResourceList
		KWOK        string
	}
	baseLabels := func(name, pool string, extra map[string]string) map[string]string {
		l := map[string]string{"my/pool": pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	cases := map[string]struct {
		pools []Pool
		want  []node
	}{
		"no pools, no nodes": {},
		"default allocatable, numbered names": {
			pools: []Pool{{Name: "general", Nodes: 2}},
			want: []node{
				{Name: "general-0", Labels: baseLabels("general-0", "general", nil), Allocatable: DefaultAllocatable(), KWOK: "fake"},
				{Name: "general-1", Labels: baseLabels("general-1", "general", nil), Allocatable: DefaultAllocatable(), KWOK: "fake"},
			},
		},
		"pool labels, taints and allocatable carried": {
			pools: []Pool{{Name: "gpu", Nodes: 1, Labels: map[string]string{"accel": "x"}, Taints: []corev1.Taint{taint}, Allocatable: small}},
			want: []node{
				{Name: "gpu-0", Labels: baseLabels("gpu-0", "gpu", map[string]string{"accel": "x"}), Taints: []corev1.Taint{taint}, Allocatable: small, KWOK: "fake"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []node
			for _, n := range nodesFor(tc.pools, "my/pool") {
				if !n.Status.Capacity.Cpu().Equal(*n.Status.Allocatable.Cpu()) {
					t.Errorf("node %s: capacity %v differs from allocatable %v", n.Name, n.Status.Capacity, n.Status.Allocatable)
				}
				got = append(got, node{n.Name, n.Labels, n.Spec.Taints, n.Status.Allocatable, n.Annotations[kwokNodeAnnotation]})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodesForDoesNotShareMaps(t *testing.T) {
	pool := Pool{Name: "p", Nodes: 2, Labels: map[string]string{"a": "b"}}
	nodes := nodesFor([]Pool{pool}, "pool")
	nodes[0].Labels["a"] = "changed"
	if nodes[1].Labels["a"] != "b" || pool.Labels["a"] != "b" {
		t.Errorf("nodes share the pool's label map: %v %v", nodes[1].Labels, pool.Labels)
	}
}
