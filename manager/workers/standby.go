package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Standby keeps a replica that does not lead connected to every worker:
// each Interval it connects to each WorkerCluster's worker as the
// WorkerCluster controller would (the Secret read, a probe, the caches of
// mirrors and capacity started), and drops the connections whose
// WorkerCluster is gone. Nothing is written: no status, no token renewal,
// no subscriber told (Pool.Leading). So when the replica takes the lease
// its caches already hold the workers' mirrors, and its first status copy
// waits for no worker's list — at 100,000 tracked Jobs a cold replica
// took 83–132 s to cache ten workers' mirrors after the lease. Once the
// replica leads it tells the Job controller the mirrors that changed
// meanwhile (Pool.TellHeldBack) and stops: the WorkerCluster controller keeps the
// connections from then on (Connect is serialized per worker, so its
// reconciles and a last round of the standby do not race).
type Standby struct {
	Pool *Pool
	// Reader lists the WorkerClusters, from the manager cache.
	Reader   client.Reader
	Interval time.Duration
	Clock    clock.Clock

	// reasons are the Connected reasons each worker had at the last round,
	// so a change is logged once.
	reasons map[string]string
	// looked are the WorkerClusters of the last whole round (Warm).
	looked atomic.Pointer[[]string]
}

// Warm is nil once this replica's caches hold what the workers have: after
// a whole round, no WorkerCluster's worker answers while its caches are
// still listing (a worker without a credential or that does not answer
// has nothing to wait for); else it says which are. A replica stands for
// election only once warm (election.Candidacy), so that a cold one does
// not take the lease from a warm one.
func (s *Standby) Warm() error {
	looked := s.looked.Load()
	if looked == nil {
		return errors.New("the standby has not connected to the workers yet")
	}
	var listing []string
	for _, name := range *looked {
		if conn := s.Pool.connection(name); conn != nil && conn.listing() {
			listing = append(listing, name)
		}
	}
	if len(listing) > 0 {
		return fmt.Errorf("the caches of %d worker(s) are still listing their mirrors: %s", len(listing), strings.Join(listing, ", "))
	}
	return nil
}

// NeedLeaderElection: the standby runs on every replica, and ends at once
// on the leader.
func (s *Standby) NeedLeaderElection() bool { return false }

// Start runs rounds until the replica leads or ctx ends.
func (s *Standby) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("standby")
	ctx = logf.IntoContext(ctx, log)
	for !s.Pool.Leads() {
		s.round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-s.Pool.Leading:
		case <-s.Clock.After(s.Interval):
		}
	}
	log.Info("leading: the WorkerCluster controller keeps the worker connections", "connections", len(s.Pool.Names()))
	s.Pool.TellHeldBack(ctx)
	return nil
}

// round connects to every WorkerCluster's worker and drops the
// connections of those gone. It stops short once the replica leads.
func (s *Standby) round(ctx context.Context) {
	log := logf.FromContext(ctx)
	var list v1alpha1.WorkerClusterList
	if err := s.Reader.List(ctx, &list); err != nil {
		// A read of the manager cache: it fails only while stopping; the
		// next round reads again.
		log.Error(err, "listing WorkerClusters to keep their workers connected")
		return
	}
	if s.reasons == nil {
		s.reasons = map[string]string{}
	}
	present := sets.New[string]()
	looked := make([]string, 0, len(list.Items))
	for i := range list.Items {
		if s.Pool.Leads() {
			return
		}
		wc := &list.Items[i]
		present.Insert(wc.Name)
		looked = append(looked, wc.Name)
		connected, _ := s.Pool.Connect(ctx, wc)
		if s.reasons[wc.Name] != connected.Reason {
			log.Info("worker connection", "worker", wc.Name, "reason", connected.Reason, "message", connected.Message)
			s.reasons[wc.Name] = connected.Reason
		}
	}
	for _, name := range s.Pool.Names() {
		if !present.Has(name) && !s.Pool.Leads() {
			s.Pool.Drop(name)
		}
	}
	for name := range s.reasons {
		if !present.Has(name) {
			delete(s.reasons, name)
		}
	}
	s.looked.Store(&looked)
}
