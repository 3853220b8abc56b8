package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// A node holds as many bench Jobs as its scarcest resource allows, pods
// included; a pool without a requested resource holds none.
func TestRoomForCountsTheScarcestResourcePerNode(t *testing.T) {
	requests := benchRequests() // 100m CPU, 64Mi
	for _, tc := range []struct {
		name  string
		pools []localcluster.Pool
		want  int
	}{
		{"pods bound: 16 CPUs hold 160, 110 pods", []localcluster.Pool{SimulatedPool(200)}, 200 * 110},
		{"CPU bound", []localcluster.Pool{{Nodes: 3, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}}}, 3 * 20},
		{"memory bound, no pod limit", []localcluster.Pool{{Nodes: 1, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("640Mi")}}}, 10},
		{"no memory", []localcluster.Pool{{Nodes: 5, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}}, 0},
		{"two pools add up", []localcluster.Pool{SimulatedPool(1), SimulatedPool(2)}, 330},
	} {
		if got := roomFor(tc.pools, requests); got != tc.want {
			t.Errorf("%s: room %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Each worker's share follows its room; the deviation is the worst
// worker's; a worker that ran more at once than its room is named.
func TestPlacementOfComparesWithTheShareByRoom(t *testing.T) {
	room := map[string]int{"worker-1": 100, "worker-2": 300, "worker-10": 100}
	placed := map[string]int{"worker-1": 90, "worker-2": 330, "worker-10": 80}
	peak := map[string]int{"worker-1": 100, "worker-2": 301, "worker-10": 50}
	p := placementOf(room, placed, peak)
	if got := []string{p.Workers[0].Worker, p.Workers[1].Worker, p.Workers[2].Worker}; !slices.Equal(got, []string{"worker-1", "worker-2", "worker-10"}) {
		t.Errorf("workers in order %v", got)
	}
	// 500 placed: shares 100, 300, 100; worker-10 is 20 % short.
	if p.Workers[1].Share != 300 || p.Workers[2].Share != 100 {
		t.Errorf("shares %+v", p.Workers)
	}
	if p.MaxDeviation < 0.1999 || p.MaxDeviation > 0.2001 {
		t.Errorf("largest deviation %.4f, want 0.2", p.MaxDeviation)
	}
	if !slices.Equal(p.OverCommitted, []string{"worker-2"}) {
		t.Errorf("over-committed %v, want worker-2 (301 running, room 300; worker-1 at exactly its room is not)", p.OverCommitted)
	}
	row := placementRow(1000, &p)
	if want := "| 1000 | 3 | varies | varies | 80 / 330 | 20.0 % | 301 / 300 (worker-2) | worker-2 |"; !strings.Contains(row, want) {
		t.Errorf("row %q lacks %q", row, want)
	}
}

// The observer counts a mirror where it was first seen, and running from
// its first active pod until it finishes, keeping each worker's peak.
func TestObserverCountsMirrorsRunningPerWorker(t *testing.T) {
	o := newObserver()
	now := time.Now()
	mirror := func(name string, active int32, complete bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: batchv1.JobStatus{Active: active}}
		if complete {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	o.seen(mirrors, "worker-1", mirror("a", 0, false), now)
	o.seen(mirrors, "worker-1", mirror("a", 1, false), now)
	o.seen(mirrors, "worker-1", mirror("b", 1, false), now)
	o.seen(mirrors, "worker-1", mirror("b", 1, false), now) // an update that changes nothing
	o.seen(mirrors, "worker-1", mirror("a", 0, true), now)
	o.seen(mirrors, "worker-1", mirror("c", 1, false), now)
	o.seen(mirrors, "worker-2", mirror("d", 1, false), now)
	p := o.placement(map[string]int{"worker-1": 2, "worker-2": 2})
	got := map[string][2]int{}
	for _, w := range p.Workers {
		got[w.Worker] = [2]int{w.Placed, w.PeakRunning}
	}
	if got["worker-1"] != [2]int{3, 2} || got["worker-2"] != [2]int{1, 1} {
		t.Errorf("placed, peak running per worker %v; want worker-1 3, 2 and worker-2 1, 1", got)
	}
	if o.runningOn["worker-1"] != 2 || len(p.OverCommitted) != 0 {
		t.Errorf("running now on worker-1 %d (want b and c), over-committed %v", o.runningOn["worker-1"], p.OverCommitted)
	}
}
