package workers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// namespaceCache remembers, per namespace name of one worker, what a GET of
// it returned (its Pod Security labels matter to placement) and when, or
// what jobferry's own write of it returned.
type namespaceCache struct {
	mu      sync.Mutex
	entries map[string]namespaceEntry
}

type namespaceEntry struct {
	ns   *corev1.Namespace // nil: it does not exist
	read time.Time
}

// get returns the namespace read at most ttl before now (ok: there is one).
func (c *namespaceCache) get(name string, now time.Time, ttl time.Duration) (ns *corev1.Namespace, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || now.Sub(e.read) >= ttl {
		return nil, false
	}
	return e.ns, true
}

// put remembers ns (nil: it does not exist) as read at t.
func (c *namespaceCache) put(name string, ns *corev1.Namespace, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]namespaceEntry{}
	}
	c.entries[name] = namespaceEntry{ns: ns, read: t}
}

// forget drops what is remembered of namespace name.
func (c *namespaceCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, name)
}
