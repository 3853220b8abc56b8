package bench

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// Placement is how the manager spread an arm's Jobs over the workers,
// against each worker's share of the room: a worker with twice the room
// should get twice the Jobs (within 10 %), and never run more at once than
// it has room for.
type Placement struct {
	Workers []WorkerPlacement `json:"workers"`
	// MaxDeviation is the largest |placed - share| / share over the
	// workers with room.
	MaxDeviation float64 `json:"maxDeviation"`
	// OverCommitted are the workers that ran more of the arm's Jobs at once
	// than they had room for.
	OverCommitted []string `json:"overCommitted,omitempty"`
}

// WorkerPlacement is one worker's part of an arm.
type WorkerPlacement struct {
	Worker string `json:"worker"`
	// Room is how many bench Jobs the worker's nodes hold at once.
	Room int `json:"room"`
	// Share is the arm's mirrors times the worker's part of all the room.
	Share float64 `json:"share"`
	// Placed counts the mirrors made there, PeakRunning the most seen
	// running there at once.
	Placed      int `json:"placed"`
	PeakRunning int `json:"peakRunning"`
}

// roomFor is how many Jobs each asking for requests (one pod) the pools'
// nodes hold at once.
func roomFor(pools []localcluster.Pool, requests corev1.ResourceList) int {
	room := 0
	for _, p := range pools {
		allocatable := p.Allocatable
		if len(allocatable) == 0 {
			allocatable = localcluster.DefaultAllocatable()
		}
		perNode := math.MaxInt
		if pods, ok := allocatable[corev1.ResourcePods]; ok {
			perNode = int(pods.Value())
		}
		for name, want := range requests {
			have, ok := allocatable[name]
			if !ok {
				perNode = 0
				break
			}
			if want.MilliValue() > 0 {
				perNode = min(perNode, int(have.MilliValue()/want.MilliValue()))
			}
		}
		room += p.Nodes * perNode
	}
	return room
}

// placementOf compares the mirrors placed on each worker with its share of
// the room, and the most it ran at once with its room.
func placementOf(room, placed, peak map[string]int) Placement {
	totalRoom, totalPlaced := 0, 0
	for _, r := range room {
		totalRoom += r
	}
	for _, n := range placed {
		totalPlaced += n
	}
	var out Placement
	for worker, r := range room {
		w := WorkerPlacement{Worker: worker, Room: r, Placed: placed[worker], PeakRunning: peak[worker]}
		if totalRoom > 0 {
			w.Share = float64(totalPlaced) * float64(r) / float64(totalRoom)
		}
		if w.Share > 0 {
			out.MaxDeviation = max(out.MaxDeviation, math.Abs(float64(w.Placed)-w.Share)/w.Share)
		}
		if w.PeakRunning > r {
			out.OverCommitted = append(out.OverCommitted, worker)
		}
		out.Workers = append(out.Workers, w)
	}
	slices.SortFunc(out.Workers, func(a, b WorkerPlacement) int { return compareWorkers(a.Worker, b.Worker) })
	slices.SortFunc(out.OverCommitted, compareWorkers)
	return out
}

// compareWorkers orders worker-2 before worker-10.
func compareWorkers(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
