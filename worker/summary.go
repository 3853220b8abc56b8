package worker

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// UnlabelledPool names the pool of ready nodes that lack the pool label.
const UnlabelledPool = "default"

// Summarize groups the ready, schedulable nodes by the pool label and sums,
// per pool, what they offer and what their non-terminal pods request.
// Terminating pods still count (KEP-3939): their containers may run until
// they are terminal. Labels and taints are those shared by every node of the
// pool. Pools are sorted by name.
func Summarize(nodes []corev1.Node, pods []corev1.Pod, poolLabel string) []v1alpha1.NodePool {
	pools, poolOfNode := NodePools(nodes, poolLabel)
	requested := map[string]corev1.ResourceList{}
	for i := range pods {
		pod := &pods[i]
		name, ok := poolOfNode[pod.Spec.NodeName]
		if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if requested[name] == nil {
			requested[name] = corev1.ResourceList{}
		}
		AddTo(requested[name], PodRequests(pod))
	}
	return WithRequested(pools, requested)
}

// NodePools are the pools of the ready, schedulable nodes (what they offer,
// the labels and taints all their nodes share; nothing requested yet),
// sorted by name, and the pool of each such node.
func NodePools(nodes []corev1.Node, poolLabel string) ([]v1alpha1.NodePool, map[string]string) {
	pools := map[string]*v1alpha1.NodePool{}
	poolOfNode := map[string]string{}
	for i := range nodes {
		n := &nodes[i]
		if !usable(n) {
			continue
		}
		name := n.Labels[poolLabel]
		if name == "" {
			name = UnlabelledPool
		}
		poolOfNode[n.Name] = name
		p, seen := pools[name]
		if !seen {
			p = &v1alpha1.NodePool{Name: name, Labels: maps.Clone(n.Labels), Taints: slices.Clone(n.Spec.Taints),
				Allocatable: corev1.ResourceList{}, Requested: corev1.ResourceList{}}
			pools[name] = p
		} else {
			maps.DeleteFunc(p.Labels, func(k, v string) bool { return n.Labels[k] != v })
			p.Taints = slices.DeleteFunc(p.Taints, func(t corev1.Taint) bool {
				return !slices.ContainsFunc(n.Spec.Taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) && o.Value == t.Value })
			})
		}
		p.Nodes++
		AddTo(p.Allocatable, n.Status.Allocatable)
	}
	out := make([]v1alpha1.NodePool, 0, len(pools))
	for _, p := range pools {
		if len(p.Taints) == 0 {
			p.Taints = nil
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b v1alpha1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	return out, poolOfNode
}

// PodRequests is what a pod holds of its node's allocatable: its
// containers' requests and one of the node's pods.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	requests[corev1.ResourcePods] = resource.MustParse("1")
	return requests
}

// WithRequested are the pools (of NodePools) with what their pods request,
// requested by pool name, and what that leaves free (never below zero).
func WithRequested(pools []v1alpha1.NodePool, requested map[string]corev1.ResourceList) []v1alpha1.NodePool {
	out := make([]v1alpha1.NodePool, len(pools))
	for i, p := range pools {
		p.Requested = corev1.ResourceList{}
		AddTo(p.Requested, requested[p.Name])
		p.Free = corev1.ResourceList{}
		for name, total := range p.Allocatable {
			free := total.DeepCopy()
			free.Sub(p.Requested[name])
			if free.Sign() < 0 {
				free = resource.Quantity{Format: total.Format}
			}
			p.Free[name] = free
		}
		out[i] = p
	}
	return out
}

// usable nodes are Ready and not cordoned.
func usable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AddTo adds l to sum, resource by resource.
func AddTo(sum, l corev1.ResourceList) {
	for name, q := range l {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}
