package workers

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deletedMirrorMemory is how long a mirror deleted by this manager is taken
// for gone though the worker's cache may still list it: far longer than the
// cache takes to see the deletion.
const deletedMirrorMemory = time.Minute

// DeletedMirrors remembers, per worker, the mirrors (by UID) this manager
// deleted, so a reconcile or an orphan collection that reads a cache not
// showing the deletion yet does not send a second DELETE (a 404 or a failed
// precondition, but a request the worker's API server pays for all the
// same: 0.13–0.31 per Job when every manager Job of a bench was deleted).
type DeletedMirrors struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	at    map[types.UID]time.Time
	// pruneAt is the size at which expired entries are dropped next.
	pruneAt int
}

func NewDeletedMirrors(clk clock.PassiveClock) *DeletedMirrors {
	return &DeletedMirrors{clock: clk, at: map[types.UID]time.Time{}, pruneAt: 1024}
}

// Recently reports whether the mirror uid was deleted within
// deletedMirrorMemory.
func (d *DeletedMirrors) Recently(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[uid]
	return ok && d.clock.Since(at) < deletedMirrorMemory
}

func (d *DeletedMirrors) Remember(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.at[uid] = now
	if len(d.at) < d.pruneAt {
		return
	}
	for u, at := range d.at {
		if now.Sub(at) >= deletedMirrorMemory {
			delete(d.at, u)
		}
	}
	d.pruneAt = max(1024, 2*len(d.at))
}

// DeleteMirror deletes exactly this mirror (UID precondition) and, through
// background propagation, its pods, unless this manager deleted it already;
// deleted says whether it sent the request.
func DeleteMirror(ctx context.Context, conn Conn, worker string, m *batchv1.Job) (deleted bool, err error) {
	memo := conn.DeletedMirrors()
	if memo.Recently(m.UID) {
		return false, nil
	}
	err = conn.Client().Delete(ctx, m, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &m.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("deleting mirror %s/%s on %s: %w", m.Namespace, m.Name, worker, err)
	}
	// Gone, or (NotFound, Conflict) gone already or replaced: either way
	// this UID needs no other request.
	memo.Remember(m.UID)
	return true, nil
}
