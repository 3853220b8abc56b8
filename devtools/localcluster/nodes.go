package localcluster

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pool is a group of identical fake nodes.
type Pool struct {
	Name  string
	Nodes int
	// Labels are added to every node, besides the pool label.
	Labels map[string]string
	Taints []corev1.Taint
	// Allocatable of each node; DefaultAllocatable when empty.
	Allocatable corev1.ResourceList
}

// DefaultAllocatable is what a node of a pool offers unless the pool says otherwise.
func DefaultAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// kwokNodeAnnotation marks the nodes KWOK manages (--manage-nodes-with-annotation-selector).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// nodesFor builds the Node objects of the pools. Node names are
// "<pool>-<i>", unique within a cluster.
// NodesFor are the Node objects of pools, as a cluster registers them (for
// a simulated worker's capacity summary, which has no real nodes).
func NodesFor(pools []Pool, poolLabel string) []*corev1.Node { return nodesFor(pools, poolLabel) }

func nodesFor(pools []Pool, poolLabel string) []*corev1.Node {
	var nodes []*corev1.Node
	for _, pool := range pools {
		allocatable := pool.Allocatable
		if len(allocatable) == 0 {
			allocatable = DefaultAllocatable()
		}
		for i := range pool.Nodes {
			name := fmt.Sprintf("%s-%d", pool.Name, i)
			labels := maps.Clone(pool.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[poolLabel] = pool.Name
			labels["kubernetes.io/hostname"] = name
			labels["kubernetes.io/os"] = "linux"
			labels["kubernetes.io/arch"] = "amd64"
			labels["type"] = "kwok"
			nodes = append(nodes, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Labels:      labels,
					Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				},
				Spec: corev1.NodeSpec{Taints: append([]corev1.Taint(nil), pool.Taints...)},
				Status: corev1.NodeStatus{
					Allocatable: allocatable.DeepCopy(),
					Capacity:    allocatable.DeepCopy(),
				},
			})
		}
	}
	return nodes
}
