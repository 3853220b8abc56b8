//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// KWOK's fake nodes stay Ready in a cluster left idle for three minutes
// (several node-monitor grace periods): each renews its Lease in
// kube-node-lease as a kubelet does, no node ever shows Ready other than
// True, and the node-lifecycle controller records no NodeNotReady Event.
func TestIdleClusterKeepsNodesReady(t *testing.T) {
	t.Parallel()
	_, c := startCluster(t, localcluster.Spec{Name: "idle", Pools: []localcluster.Pool{{Name: "general", Nodes: 2}}})
	ctx := t.Context()
	const idle = 3 * time.Minute
	renewals := map[string]map[string]bool{}
	noLease := map[string]bool{}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, idle+time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
					t.Errorf("%s after %s: node %s Ready=%s (%s)", time.Now().Format(time.TimeOnly), time.Since(start).Round(time.Second), n.Name, cond.Status, cond.Reason)
				}
			}
			lease, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				if !noLease[n.Name] {
					t.Errorf("node %s has no Lease: %v", n.Name, err)
				}
				noLease[n.Name] = true
				continue
			}
			if renewals[n.Name] == nil {
				renewals[n.Name] = map[string]bool{}
			}
			if lease.Spec.RenewTime != nil {
				renewals[n.Name][lease.Spec.RenewTime.String()] = true
			}
		}
		return time.Since(start) >= idle, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for node, times := range renewals {
		if len(times) < 3 {
			t.Errorf("node %s renewed its Lease %d times in %s", node, len(times), idle)
		}
	}
	events, err := c.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=NodeNotReady"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("NodeNotReady Event: %s %s", e.InvolvedObject.Name, e.Message)
	}
	t.Logf("%d nodes Ready throughout %s; lease renewals seen per node: %v", len(renewals), idle, func() map[string]int {
		out := map[string]int{}
		for n, times := range renewals {
			out[n] = len(times)
		}
		return out
	}())
}
