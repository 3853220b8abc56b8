package workers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// MirrorChange is a change of a mirror the pool held back while its
// replica stood by (Handlers.MirrorsHeldBack): which mirror, and when the
// change was first seen.
type MirrorChange struct {
	Worker string
	Job    types.NamespacedName
	Seen   time.Time
}

// heldBackChanges is how many of the latest mirror changes a standby
// remembers: those of the seconds before its election that it tells
// (Pool.HeldBackFor, ~30 s) at up to ~1,000 changes a second, 2 MiB at
// most. Whatever a full memory overwrote still reaches the new leader
// through its Job controller's first list, at low priority.
const heldBackChanges = 32768

// heldBack remembers the latest mirror changes a pool held back while its
// replica did not lead, in the order seen (a ring of heldBackChanges), until
// they are handed over at the election; from then on it holds nothing back.
// A new leader's Job controller otherwise sees those changes only in its
// first list of every Job, at low priority: at 100,000 tracked Jobs the
// mirrors that completed while the lease changed hands waited behind the
// ones that completed after it.
type heldBack struct {
	mu sync.Mutex
	// over: handed over; nothing more is held back.
	over bool
	// ring holds the changes; next is where the next one goes once it is
	// full, overwriting the oldest (overwritten counts them).
	ring        []MirrorChange
	next        int
	overwritten int
}

// hold remembers a change, unless the changes were handed over already:
// then it returns false and the caller tells it itself.
func (h *heldBack) hold(c MirrorChange) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return false
	}
	if len(h.ring) < heldBackChanges {
		h.ring = append(h.ring, c)
		return true
	}
	h.ring[h.next] = c
	h.next = (h.next + 1) % len(h.ring)
	h.overwritten++
	return true
}

// handOver returns the changes held back that were seen at or after since,
// one per mirror (when it was first seen since then), oldest first, and how
// many a full memory overwrote; it holds nothing back from then on.
func (h *heldBack) handOver(since time.Time) ([]MirrorChange, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.over = true
	ordered := append(h.ring[h.next:len(h.ring):len(h.ring)], h.ring[:h.next]...)
	overwritten := h.overwritten
	h.ring, h.next, h.overwritten = nil, 0, 0

	type mirror struct {
		worker string
		job    types.NamespacedName
	}
	seen := make(map[mirror]bool, len(ordered))
	changes := ordered[:0]
	for _, c := range ordered {
		m := mirror{c.Worker, c.Job}
		if !c.Seen.Before(since) && !seen[m] {
			seen[m] = true
			changes = append(changes, c)
		}
	}
	return changes, overwritten
}
