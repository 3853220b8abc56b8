package jobs

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/jobferry/jobferry/manager/tenantlimits"
)

// chargesInFlight remembers the charges of Jobs placed moments ago, under
// placeMu, until the cache shows them placed (or a minute passed): the
// next placement in the namespace must count them.
type chargesInFlight struct {
	mu    sync.Mutex
	byJob map[types.UID]inFlight
}

type inFlight struct {
	namespace string
	charge    tenantlimits.Charged
	at        time.Time
}

// quotaWaiters are the Jobs a full quota holds back, by namespace: a Job
// of the namespace that finishes or goes wakes them all (each is placed
// again, in the order the work queue takes them).
type quotaWaiters struct {
	mu          sync.Mutex
	byNamespace map[string]map[string]bool
}

func (c *chargesInFlight) add(uid types.UID, namespace string, charge tenantlimits.Charged, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byJob == nil {
		c.byJob = map[types.UID]inFlight{}
	}
	c.byJob[uid] = inFlight{namespace: namespace, charge: charge, at: now}
}

func (c *chargesInFlight) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byJob, uid)
}

// in is the charges in flight in namespace; older ones are dropped.
func (c *chargesInFlight) in(namespace string, now time.Time) map[types.UID]tenantlimits.Charged {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[types.UID]tenantlimits.Charged{}
	for uid, f := range c.byJob {
		switch {
		case now.Sub(f.at) > time.Minute:
			delete(c.byJob, uid)
		case f.namespace == namespace:
			out[uid] = f.charge
		}
	}
	return out
}

func (q *quotaWaiters) add(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byNamespace == nil {
		q.byNamespace = map[string]map[string]bool{}
	}
	if q.byNamespace[key.Namespace] == nil {
		q.byNamespace[key.Namespace] = map[string]bool{}
	}
	q.byNamespace[key.Namespace][key.Name] = true
}

func (q *quotaWaiters) remove(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.byNamespace[key.Namespace], key.Name)
	if len(q.byNamespace[key.Namespace]) == 0 {
		delete(q.byNamespace, key.Namespace)
	}
}

// take removes and returns the namespace's waiters.
func (q *quotaWaiters) take(namespace string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for name := range q.byNamespace[namespace] {
		out = append(out, name)
	}
	delete(q.byNamespace, namespace)
	return out
}
