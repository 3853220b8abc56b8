package simworker

import (
	"hash/fnv"
	"maps"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobferry/jobferry/worker"
)

// usage is what a simulated worker's running Jobs request, per pool, kept
// from the Jobs' events so the capacity summary each second does not
// rebuild every running Job's pods: at 37,000 running Jobs over ten
// workers that rebuild took 41 % of the workers' CPU. A Job's pods are
// spread over the nodes from a hash of its UID, as if scheduled.
type usage struct {
	nodes      []corev1.Node
	poolOfNode map[string]string

	mu sync.Mutex
	// byJob is each running Job's requests by pool; requested their sum.
	byJob     map[types.UID]map[string]corev1.ResourceList
	requested map[string]corev1.ResourceList
}

func newUsage(nodes []corev1.Node, poolOfNode map[string]string) *usage {
	return &usage{nodes: nodes, poolOfNode: poolOfNode, byJob: map[types.UID]map[string]corev1.ResourceList{}, requested: map[string]corev1.ResourceList{}}
}

// set counts the Job as it is now: its pods' requests while it runs,
// nothing once it does not.
func (u *usage) set(job *batchv1.Job) {
	now := u.of(job)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sub(u.byJob[job.UID])
	delete(u.byJob, job.UID)
	if len(now) > 0 {
		u.byJob[job.UID] = now
		for pool, l := range now {
			if u.requested[pool] == nil {
				u.requested[pool] = corev1.ResourceList{}
			}
			worker.AddTo(u.requested[pool], l)
		}
	}
}

// remove stops counting a deleted Job.
func (u *usage) remove(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sub(u.byJob[uid])
	delete(u.byJob, uid)
}

func (u *usage) sub(byPool map[string]corev1.ResourceList) {
	for pool, l := range byPool {
		sum := u.requested[pool]
		for name, q := range l {
			v := sum[name]
			v.Sub(q)
			if v.IsZero() {
				delete(sum, name)
			} else {
				sum[name] = v
			}
		}
		if len(sum) == 0 {
			delete(u.requested, pool)
		}
	}
}

// snapshot is what the running Jobs request now, by pool.
func (u *usage) snapshot() map[string]corev1.ResourceList {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]corev1.ResourceList, len(u.requested))
	for pool, l := range u.requested {
		out[pool] = maps.Clone(l)
	}
	return out
}

// of is what the Job's pods request, by pool: nothing unless it runs.
func (u *usage) of(job *batchv1.Job) map[string]corev1.ResourceList {
	if !running(job) || len(u.nodes) == 0 {
		return nil
	}
	perPod := worker.PodRequests(&corev1.Pod{Spec: corev1.PodSpec{Containers: job.Spec.Template.Spec.Containers}})
	h := fnv.New32a()
	h.Write([]byte(job.UID))
	out := map[string]corev1.ResourceList{}
	for i := range job.Status.Active {
		pool, ok := u.poolOfNode[u.nodes[(int(h.Sum32())+int(i))%len(u.nodes)].Name]
		if !ok {
			continue
		}
		if out[pool] == nil {
			out[pool] = corev1.ResourceList{}
		}
		worker.AddTo(out[pool], perPod)
	}
	return out
}
