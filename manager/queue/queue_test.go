package queue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/queue/workload"
)

func TestCheckEntryAppliesOnlyJobferrysEntry(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	obj, err := checkEntry("team", "job-train-1", "4711", "dispatch", workload.CheckUpdate{State: kueue.CheckStateRetry, Message: "worker lost", RequeueAfterSeconds: ptr.To[int32](5)}, now)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":"job-train-1","namespace":"team","resourceVersion":"4711"},` +
		`"status":{"admissionChecks":[{"lastTransitionTime":"2026-11-25T12:00:00Z","message":"worker lost","name":"dispatch","requeueAfterSeconds":5,"state":"Retry"}]}}`
	if string(raw) != want {
		t.Errorf("applied\n%s\nwant\n%s", raw, want)
	}
}

func TestActiveCondition(t *testing.T) {
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: kueue.AdmissionCheckSpec{ControllerName: ControllerName}}
	if c := activeCondition(ac); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("jobferry's check: %+v, want Active", c)
	}
	ac.Spec.Parameters = &kueue.AdmissionCheckParametersReference{APIGroup: "example.com", Kind: "Config", Name: "x"}
	c := activeCondition(ac)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonParametersUnsupported || !strings.Contains(c.Message, "Config x") {
		t.Errorf("a check naming parameters: %+v, want inactive saying why", c)
	}
}

func TestQuotaFollowsCapacity(t *testing.T) {
	pool := func(cpu, gpu string) v1alpha1.NodePool {
		alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		if gpu != "" {
			alloc["example.com/gpu"] = resource.MustParse(gpu)
		}
		return v1alpha1.NodePool{Allocatable: alloc, Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	}
	capacity := capacityOf([]v1alpha1.NodePool{pool("16", ""), pool("32", "8"), pool("500m", "")})
	if cpu, gpu := capacity[corev1.ResourceCPU], capacity["example.com/gpu"]; cpu.String() != "48500m" || gpu.String() != "8" {
		t.Fatalf("capacity of the pools: cpu %s gpu %s, want their allocatable summed (48500m, 8)", cpu.String(), gpu.String())
	}

	quota := func(name corev1.ResourceName, q string) kueue.ResourceQuota {
		return kueue.ResourceQuota{Name: name, NominalQuota: resource.MustParse(q), BorrowingLimit: ptr.To(resource.MustParse("4"))}
	}
	cq := &kueue.ClusterQueue{Spec: kueue.ClusterQueueSpec{ResourceGroups: []kueue.ResourceGroup{
		{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}, Flavors: []kueue.FlavorQuotas{
			{Name: "workers", Resources: []kueue.ResourceQuota{quota(corev1.ResourceCPU, "10"), quota(corev1.ResourceMemory, "1Gi")}},
			{Name: "spot", Resources: []kueue.ResourceQuota{quota(corev1.ResourceCPU, "3"), quota(corev1.ResourceMemory, "1Gi")}},
		}},
	}}}
	updated, changed, missing := withNominalQuota(cq, "workers", capacity)
	if !changed || missing {
		t.Fatalf("changed %v missing %v, want a change", changed, missing)
	}
	if got := describeQuota(updated, "workers"); got != "cpu=48500m,memory=0" {
		t.Errorf("workers' quota %s, want the capacity (and none of what no pool has)", got)
	}
	if got := describeQuota(updated, "spot"); got != "cpu=3,memory=1Gi" {
		t.Errorf("another flavor's quota changed: %s", got)
	}
	if b := updated.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit; b == nil || b.String() != "4" {
		t.Errorf("the borrowing limit changed: %v", b)
	}
	if describeQuota(cq, "workers") != "cpu=10,memory=1Gi" {
		t.Error("withNominalQuota modified its input")
	}
	if _, changed, _ := withNominalQuota(updated, "workers", capacity); changed {
		t.Error("the same capacity again is a change")
	}
	if _, _, missing := withNominalQuota(cq, "gpus", capacity); !missing {
		t.Error("a flavor no resource group lists is not reported")
	}
}

// A worker's published capacity is input with an attacker (a node
// credential can inflate its allocatable): its WorkerCluster's quotaCap
// bounds what it adds to a quota that follows capacity, resource by
// resource, and says what it cut.
func TestQuotaCapBoundsWhatAWorkerAdds(t *testing.T) {
	inflated := []v1alpha1.NodePool{
		{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100000"), corev1.ResourceMemory: resource.MustParse("64Gi")}},
		{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "example.com/gpu": resource.MustParse("4")}},
	}
	for name, tc := range map[string]struct {
		quotaCap       corev1.ResourceList
		adds, overWant string
	}{
		"no cap":                     {nil, "cpu=100008,example.com/gpu=4,memory=64Gi", ""},
		"cap binds on cpu only":      {corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("128Gi")}, "cpu=64,example.com/gpu=4,memory=64Gi", "cpu=100008"},
		"cap on what it has none of": {corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}, "cpu=100008,example.com/gpu=4,memory=64Gi", ""},
		"cap equal to capacity":      {corev1.ResourceList{"example.com/gpu": resource.MustParse("4")}, "cpu=100008,example.com/gpu=4,memory=64Gi", ""},
	} {
		t.Run(name, func(t *testing.T) {
			adds, over := contribution(inflated, tc.quotaCap)
			if got := describeList(adds); got != tc.adds {
				t.Errorf("adds %s, want %s", got, tc.adds)
			}
			if got := describeList(over); got != tc.overWant {
				t.Errorf("over %q, want %q", got, tc.overWant)
			}
		})
	}
	negative, _ := contribution([]v1alpha1.NodePool{{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1000")}}}, nil)
	if cpu := negative[corev1.ResourceCPU]; cpu.Sign() != 0 {
		t.Errorf("a worker publishing -1000 cpu adds %s, want 0", cpu.String())
	}
	total := corev1.ResourceList{}
	capped, _ := contribution(inflated, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")})
	addTo(total, capped)
	honest, _ := contribution([]v1alpha1.NodePool{{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}}}, nil)
	addTo(total, honest)
	if cpu := total[corev1.ResourceCPU]; cpu.String() != "96" {
		t.Errorf("two workers, one capped at 64, one publishing 32: the quota's cpu is %s, want 96", cpu.String())
	}
}
