package jobs

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/jobferry/jobferry/manager/admission"
	"github.com/jobferry/jobferry/manager/jobs/policy"
	"github.com/jobferry/jobferry/manager/jobstate"
	"github.com/jobferry/jobferry/manager/queue/workload"
	"github.com/jobferry/jobferry/manager/tenantlimits"
	"github.com/jobferry/jobferry/manager/workers"
)

// managerAPI names the manager cluster's API server in Events.
const managerAPI = "the manager cluster's API server"

func workerAPI(worker string) string { return "worker cluster " + worker + "'s API server" }

// JobReconciler dispatches manager Jobs: it places an unplaced Job, injecting
// the worker's directives and unsuspending it in the same update (recorded
// before anything exists on the worker), creates its mirror, carries later
// spec changes to the mirror, copies the mirror's status back, and deletes
// the mirror once its final status is copied or the manager Job is gone.
// What to do next is decided by policy.Next, a pure function of what the
// reconcile read (reads.go); the reconciler reads, asks, writes (apply: one
// handler per kind of step), and asks again. A Job with nothing to run it
// completes itself (policy.NothingToRun); one that waits shows why in its
// Suspended condition (policy.Waiting); a write the API server refuses
// becomes a Warning Event on the Job and is not made again until the Job
// changes (refusals.go). What it is told of the workers arrives through
// its subscription to the pool (jobevents.go).
type JobReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Workers are the connections to the worker clusters (workers.Pool),
	// and what the Job controller is told of them.
	Workers Workers
	// Policy says which Jobs may be dispatched, and where (tenancy).
	Policy *admission.DispatchPolicy
	// Keys gives the key that seals jobferry's state on manager Jobs
	// (statekey.Keys; package jobstate).
	Keys jobstate.KeySource
	// APIReader reads from the manager cluster's API server what the cache
	// does not know yet (a namespace created moments before its Job) or does
	// not keep (a manager Job's whole pod template).
	APIReader client.Reader
	Clock     clock.Clock
	// Config is what policy.Next applies: this installation's origin and
	// ID on the workers, the worker-lost timeout, the status batch period,
	// whether finished mirrors are deleted.
	Config policy.Config
	// Concurrency is the number of Jobs reconciled at once.
	Concurrency int
	// CapacitySettle is how long after a mirror's pods run a capacity
	// summary is trusted to include them (see assumeCache).
	CapacitySettle time.Duration
	// Queue, when set, is Kueue on the manager cluster: a Job that names a
	// LocalQueue runs when Kueue admits it, where jobferry places it
	// (policy/queued.go). Nil: every Job is dispatched as soon as it fits.
	Queue Queue
	// PodAdmission dry-runs a pod of each Job in its namespace before its
	// first mirror (tenantlimits.PodAdmission); nil in unit tests, where
	// the template is taken as admitted.
	PodAdmission PodAdmitter

	// events carry what the pool tells the controller to its work queue
	// and its wake-up (jobevents.go).
	events eventSources
	// placing is what placement shares among the Jobs placed at once.
	placing placing
	// memory is what the controller remembers of the Jobs between
	// reconciles (memories.go).
	memory memory
}

// placing is what placement shares among the Jobs placed at once: the
// requests and charges of Jobs placed moments ago, and the Jobs waiting
// for room.
type placing struct {
	// mu serialises placement, so two Jobs never both take the same free
	// capacity, nor the same room in a namespace's quota.
	mu sync.Mutex
	// assume holds what placed Jobs request until the workers' summaries
	// show it: placement adds, mirrors running and summaries end it.
	assume *assumeCache
	// waiting holds the Jobs no worker had room for (waitingroom.go).
	waiting *waitingRoom
	// charging: the quota charges of Jobs placed moments ago
	// (tenantlimits.go).
	charging chargesInFlight
	// quotaWaiting: the Jobs a full quota of their namespace holds back.
	quotaWaiting quotaWaiters
}

// stepMemo carries what one step learned to the next steps of the same
// reconcile.
type stepMemo struct {
	// placement explains the placement made, for the Dispatched Event.
	placement string
	// foreign is a same-named Job on the worker that jobferry did not create.
	foreign *batchv1.Job
}

// namespaces reads manager namespaces (see namespaceReader).
func (r *JobReconciler) namespaces() admission.NamespaceReader {
	return admission.NamespaceReader{Cache: r.Client, API: r.APIReader}
}

// conn is the connection to worker, nil when there is none.
func (r *JobReconciler) conn(worker string) workers.Conn { return r.Workers.Conn(worker) }

// Workers is what the Job controller uses of the pool of connections to the
// workers: workers.Pool, or workerstest.Pool in unit tests.
type Workers interface {
	workers.Lookup
	Connected(worker string) bool
	// Subscribe has the controller told what happens on the workers.
	Subscribe(workers.Handlers)
	// RecheckRights reviews a worker's rights after a write there was
	// refused as forbidden, and returns those missing.
	RecheckRights(ctx context.Context, worker string) []workers.Right
	// RightsRefused has the rights reviewed soon: a read was refused.
	RightsRefused(worker string)
	// ReadNamespaces refreshes what is known of namespace ns on every
	// worker, before placement.
	ReadNamespaces(ctx context.Context, ns string)
}

// Queue is Kueue's side of the Jobs it queues (queue.Queue): their
// Workloads, read from the manager's cache, and jobferry's admission check
// on them.
type Queue interface {
	View(ctx context.Context, job *batchv1.Job) (workload.View, error)
	SetCheck(ctx context.Context, namespace string, v workload.View, u workload.CheckUpdate) error
}

// PodAdmitter dry-runs a pod of a Job in its namespace
// (tenantlimits.PodAdmission).
type PodAdmitter interface {
	Admit(ctx context.Context, job *batchv1.Job) (tenantlimits.PodVerdict, error)
	// Carry keeps job's verdict for written: the Job as jobferry's own
	// placement wrote it, locked to job's resourceVersion, changing its
	// template by a worker's directives alone.
	Carry(job, written *batchv1.Job)
}

// jobEventBuffer is how many keys wait for the work queue's source.
const jobEventBuffer = 4096

// eventSources carry what the controller is told to where it acts on it:
// jobs and mirrors feed the work queue — the Jobs to look at again, and
// those whose mirror changed, ahead of the others (statusPriority); wake
// asks for a wake-up of the Jobs in the waiting room.
type eventSources struct {
	jobs, mirrors chan event.GenericEvent
	wake          chan struct{}
}

func newEventSources() eventSources {
	return eventSources{
		jobs:    make(chan event.GenericEvent, jobEventBuffer),
		mirrors: make(chan event.GenericEvent, jobEventBuffer),
		// One pending signal is enough: a wake-up reads everything afresh.
		wake: make(chan struct{}, 1),
	}
}
