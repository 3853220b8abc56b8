package policy

// Event reasons on manager Jobs.
const (
	// ReasonDispatched: placed on a worker, and its mirror created there.
	ReasonDispatched         = "Dispatched"
	ReasonUnschedulable      = "Unschedulable"
	ReasonInvalidSelector    = "InvalidClusterSelector"
	ReasonNameConflict       = "NameConflict"
	ReasonStatusRejected     = "StatusRejected"
	ReasonMirrorLeftOnWorker = "MirrorLeftOnWorker"
	ReasonMirrorSuspended    = "MirrorSuspended"
	ReasonMirrorResumed      = "MirrorResumed"
	ReasonMirrorUpdated      = "MirrorUpdated"
	ReasonWorkerLost         = "WorkerLost"
	ReasonMissingRights      = "WorkerMissingRights"
	ReasonInvalidMirror      = "InvalidMirror"
	// ReasonUntrustedState: jobferry's annotations on the Job are not what
	// its manager wrote; nothing is done for the Job.
	ReasonUntrustedState = "UntrustedState"
	// ReasonStrayMirror: a mirror of the Job that its state does not
	// account for runs on a worker; nothing is dispatched meanwhile.
	ReasonStrayMirror = "StrayMirror"
	// ReasonStateRolledBack: the Job's state records a lower attempt than
	// this manager saw it record; nothing is dispatched meanwhile.
	ReasonStateRolledBack = "StateRolledBack"
	// ReasonOverBudget: the Job holds more than jobferry keeps of one
	// (managercache.OverBudget); nothing is done for it.
	ReasonOverBudget = "OverBudget"
	// ReasonMirrorNotOurs: the Job in the mirror's place on the worker is
	// not the one jobferry created; the Job is dispatched again.
	ReasonMirrorNotOurs = "MirrorReplacedOnWorker"
	// ReasonMirrorDeleted: the mirror was deleted on the worker; the Job is
	// dispatched again.
	ReasonMirrorDeleted = "MirrorDeletedOnWorker"
	// ReasonMirrorHidden: the mirror is still on the worker but no longer
	// seen as jobferry's there; it was deleted, and the Job is dispatched
	// again.
	ReasonMirrorHidden = "MirrorHiddenOnWorker"
	// ReasonNotAllowed: the dispatch policy refuses the Job (a namespace
	// not opted in, a reserved one, pods its Pod Security level forbids):
	// it reached jobferry while the webhook did not check it.
	ReasonNotAllowed = "DispatchNotAllowed"
	// ReasonRequeued: Kueue took the queued Job's quota back (evicted or
	// preempted it); its mirror drained, its placement went, and it is
	// placed afresh when Kueue admits it again.
	ReasonRequeued = "Requeued"
	// ReasonCheckRejected: the API server refused jobferry's write of its
	// admission check on the queued Job's Workload.
	ReasonCheckRejected = "AdmissionCheckRejected"
)
