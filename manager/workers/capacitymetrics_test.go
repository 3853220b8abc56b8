package workers_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
	"github.com/jobferry/jobferry/manager/workers/workerstest"
)

func TestCapacityCollectorServesEachConnectedWorkersPools(t *testing.T) {
	conns := workerstest.NewPool(map[string]*workerstest.Conn{"w1": workerstest.NewConn("jobferry"), "w2": workerstest.NewConn("jobferry")})
	conns.Conns["w1"].Pools = []v1alpha1.NodePool{{Name: "gpu", Nodes: 2,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "example.com/gpu": resource.MustParse("8")},
		Requested:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), "example.com/gpu": resource.MustParse("2")},
		Free:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2500m"), "example.com/gpu": resource.MustParse("6")},
	}}
	conns.Conns["w2"].Down = true
	leads := func() bool { return true }
	want := `
# HELP jobferry_workercluster_pool_free Allocatable minus requested resources of a worker's node pool, from its ClusterCapacity.
# TYPE jobferry_workercluster_pool_free gauge
jobferry_workercluster_pool_free{pool="gpu",resource="cpu",worker="w1"} 2.5
jobferry_workercluster_pool_free{pool="gpu",resource="example.com/gpu",worker="w1"} 6
# HELP jobferry_workercluster_pool_nodes Schedulable, ready nodes of a worker's node pool.
# TYPE jobferry_workercluster_pool_nodes gauge
jobferry_workercluster_pool_nodes{pool="gpu",worker="w1"} 2
# HELP jobferry_workercluster_pool_requested Resources requested by the pods on a worker's node pool, terminating ones included, from its ClusterCapacity.
# TYPE jobferry_workercluster_pool_requested gauge
jobferry_workercluster_pool_requested{pool="gpu",resource="cpu",worker="w1"} 1.5
jobferry_workercluster_pool_requested{pool="gpu",resource="example.com/gpu",worker="w1"} 2
`
	if err := testutil.CollectAndCompare(workers.NewCapacityCollector(conns, leads), strings.NewReader(want),
		"jobferry_workercluster_pool_free", "jobferry_workercluster_pool_nodes", "jobferry_workercluster_pool_requested"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(workers.NewCapacityCollector(conns, leads), "jobferry_workercluster_pool_allocatable"); n != 2 {
		t.Errorf("%d allocatable series, want w1's 2 (w2 is disconnected)", n)
	}
	standby := func() bool { return false }
	if n := testutil.CollectAndCount(workers.NewCapacityCollector(conns, standby)); n != 0 {
		t.Errorf("a standby replica serves %d series, want none (the leader serves them)", n)
	}
}
