package jobs

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
)

// waitingJob is a held manager Job named name, created age ago, whose one
// pod requests cpu.
func waitingJob(name string, age time.Duration, cpu string) *batchv1.Job {
	return policytest.Job(func(j *batchv1.Job) {
		j.Name, j.UID = name, types.UID("uid-"+name)
		j.CreationTimestamp = metav1.NewTime(policytest.Now.Add(-age))
		j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	})
}

// workerWithFree is a connected worker with one pool of 8 CPUs, free CPUs
// of them free.
func workerWithFree(name, free string) dispatch.Worker {
	return dispatch.Worker{Name: name, Connected: true, Pools: []v1alpha1.NodePool{{
		Name:        "general",
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
		Free:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(free), corev1.ResourcePods: resource.MustParse("110")},
	}}}
}

func keysOf(jobs ...*batchv1.Job) []types.NamespacedName {
	out := make([]types.NamespacedName, len(jobs))
	for i, j := range jobs {
		out[i] = client.ObjectKeyFromObject(j)
	}
	return out
}

func TestToWake(t *testing.T) {
	small1, small2, small3 := waitingJob("small-1", 3*time.Minute, "1"), waitingJob("small-2", 2*time.Minute, "1"), waitingJob("small-3", time.Minute, "1")
	big := waitingJob("big", 4*time.Minute, "6")
	PlacedJob := waitingJob("placed", 5*time.Minute, "1")
	PlacedJob.Annotations[v1alpha1.WorkerAnnotation] = "w1"
	finished := waitingJob("finished", 5*time.Minute, "1")
	policytest.Complete(finished)
	all := map[types.NamespacedName]*batchv1.Job{}
	for _, j := range []*batchv1.Job{small1, small2, small3, big, PlacedJob, finished} {
		all[client.ObjectKeyFromObject(j)] = j
	}
	lookup := func(key types.NamespacedName) *batchv1.Job { return all[key] }
	gone := types.NamespacedName{Namespace: "team-a", Name: "gone"}

	cases := []struct {
		name       string
		shapes     []waitingShape
		wake, drop []types.NamespacedName
	}{
		{
			name:   "as many of the oldest as the free room takes",
			shapes: []waitingShape{{Jobs: keysOf(small1, small2, small3), Workers: []dispatch.Worker{workerWithFree("w1", "2")}}},
			wake:   keysOf(small1, small2),
		},
		{
			name: "room on every worker counts",
			shapes: []waitingShape{{Jobs: keysOf(small1, small2, small3), Workers: []dispatch.Worker{
				workerWithFree("w1", "1"), workerWithFree("w2", "1")}}},
			wake: keysOf(small1, small2),
		},
		{
			name: "a Job too big for the room does not hold back a smaller shape",
			shapes: []waitingShape{
				{Jobs: keysOf(big), Workers: []dispatch.Worker{workerWithFree("w1", "2")}},
				{Jobs: keysOf(small1, small2, small3), Workers: []dispatch.Worker{workerWithFree("w1", "2")}},
			},
			wake: keysOf(small1, small2),
		},
		{
			name: "room woken for an older shape is not offered again",
			shapes: []waitingShape{
				{Jobs: keysOf(big), Workers: []dispatch.Worker{workerWithFree("w1", "7")}},
				{Jobs: keysOf(small1, small2), Workers: []dispatch.Worker{workerWithFree("w1", "7")}},
			},
			wake: keysOf(big, small1),
		},
		{
			name: "what the workers already assume is not free",
			shapes: []waitingShape{{Jobs: keysOf(small1, small2), Workers: []dispatch.Worker{func() dispatch.Worker {
				w := workerWithFree("w1", "2")
				w.Assumed = map[string]corev1.ResourceList{"general": {corev1.ResourceCPU: resource.MustParse("1")}}
				return w
			}()}}},
			wake: keysOf(small1),
		},
		{
			name:   "no room: nothing is woken",
			shapes: []waitingShape{{Jobs: keysOf(small1, small2), Workers: []dispatch.Worker{workerWithFree("w1", "0")}}},
		},
		{
			name: "a disconnected or cordoned worker offers no room",
			shapes: []waitingShape{{Jobs: keysOf(small1), Workers: []dispatch.Worker{
				func() dispatch.Worker { w := workerWithFree("w1", "8"); w.Connected = false; return w }(),
				func() dispatch.Worker { w := workerWithFree("w2", "8"); w.Cordoned = true; return w }(),
			}}},
		},
		{
			name: "Jobs gone, placed or finished meanwhile are dropped, and the next one looked at",
			shapes: []waitingShape{{Jobs: append([]types.NamespacedName{gone}, keysOf(PlacedJob, finished, small1)...),
				Workers: []dispatch.Worker{workerWithFree("w1", "1")}}},
			wake: keysOf(small1),
			drop: append([]types.NamespacedName{gone}, keysOf(PlacedJob, finished)...),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.shapes)
			wake, drop := toWake(tc.shapes, lookup)
			if !slices.Equal(wake, tc.wake) {
				t.Errorf("woken %v, want %v", wake, tc.wake)
			}
			if !slices.Equal(drop, tc.drop) {
				t.Errorf("dropped %v, want %v", drop, tc.drop)
			}
			if after := fmt.Sprint(tc.shapes); after != before {
				t.Errorf("toWake changed its input:\n%s\n%s", before, after)
			}
		})
	}
}

func TestWaitingRoom(t *testing.T) {
	room := newWaitingRoom()
	newer, older, other := waitingJob("newer", time.Minute, "1"), waitingJob("older", 2*time.Minute, "1"), waitingJob("other", 3*time.Minute, "2")
	seen := room.pass()
	for _, j := range []*batchv1.Job{newer, older, other} {
		if missed := room.add(j, seen); missed {
			t.Errorf("adding %s: no wake-up began, yet it reports one missed", j.Name)
		}
	}
	// Adding again changes nothing.
	room.add(newer, seen)
	if got := room.begin(); fmt.Sprint(got) != fmt.Sprint([][]types.NamespacedName{keysOf(other), keysOf(older, newer)}) {
		t.Errorf("shapes %v, want [other] then [older newer]: by shape, oldest first", got)
	}
	if missed := room.add(waitingJob("late", 0, "1"), seen); !missed {
		t.Error("a Job found not fitting before a wake-up began and added after it: want missed")
	}
	// A Job whose request changed moves to its new shape.
	older.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	room.add(older, room.pass())
	if got := room.begin(); fmt.Sprint(got) != fmt.Sprint([][]types.NamespacedName{keysOf(other, older), {keysOf(newer)[0], {Namespace: "team-a", Name: "late"}}}) {
		t.Errorf("shapes %v after older's request changed", got)
	}
	for _, j := range []string{"newer", "older", "other", "late"} {
		room.remove(types.NamespacedName{Namespace: "team-a", Name: j})
	}
	if room.len() != 0 || len(room.begin()) != 0 {
		t.Errorf("the room holds %d Jobs after all were removed", room.len())
	}
}

// A Job that found no room waits until a capacity summary shows room: then it
// alone is woken, not every Job of the manager.
func TestJobReconcilerWakesWaitingJobsWhenRoomFrees(t *testing.T) {
	h := newJobsHarness(t, "w1")
	full := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	h.workers.Conns["w1"].Pools = []v1alpha1.NodePool{{Name: "general", Allocatable: full,
		Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("110")}}}
	h.create(t, policytest.Job(func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	}))
	h.reconcile(t)
	if job := h.job(t); job.Annotations[v1alpha1.WorkerAnnotation] != "" {
		t.Fatalf("placed on %s with no room", job.Annotations[v1alpha1.WorkerAnnotation])
	}
	if h.r.placing.waiting.len() != 1 {
		t.Fatalf("%d Jobs wait in the room, want the one that found no room", h.r.placing.waiting.len())
	}
	ctx := context.Background()
	// A summary without room wakes nothing.
	h.workers.CapacityChanged("w1")
	if err := h.r.wake(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(h.r.events.jobs); n != 0 {
		t.Fatalf("%d Jobs woken without room", n)
	}
	// Room frees up: the Job is woken, and placed by its reconcile.
	h.workers.Conns["w1"].Pools[0].Free = full
	h.workers.CapacityChanged("w1")
	select {
	case <-h.r.events.wake:
	default:
		t.Fatal("a capacity summary did not ask for a wake-up")
	}
	if err := h.r.wake(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-h.r.events.jobs:
		if client.ObjectKeyFromObject(e.Object) != trainKey {
			t.Fatalf("woke %v, want %v", client.ObjectKeyFromObject(e.Object), trainKey)
		}
	default:
		t.Fatal("the waiting Job was not woken once room freed up")
	}
	if h.r.placing.waiting.len() != 0 {
		t.Errorf("a woken Job is still in the room")
	}
	h.reconcile(t)
	if job := h.job(t); job.Annotations[v1alpha1.WorkerAnnotation] != "w1" || h.mirror(t, "w1") == nil {
		t.Errorf("the woken Job was not dispatched to w1: %v", job.Annotations)
	}
}
