package policy

// Event reasons on manager Jobs.
const (
	// ReasonDispatched: placed on a worker, and its mirror created there.
	ReasonDispatched = "Dispatched"
	// ReasonUnschedulable: no worker takes the Job now (the message says
	// why each does not); it waits, and is placed once one does.
	ReasonUnschedulable = "Unschedulable"
	// ReasonInvalidSelector: the Job's jobferry.dev/cluster-selector does
	// not parse; it waits until its user fixes it.
	ReasonInvalidSelector = "InvalidClusterSelector"
	// ReasonNameConflict: a Job jobferry did not create holds the mirror's
	// name on the chosen worker; that worker is excluded for the Job
	// (jobferry.dev/excluded-workers) and it is placed elsewhere.
	ReasonNameConflict = "NameConflict"
	// ReasonStatusRejected: the manager's API server rejected the status
	// copied from the mirror; it is copied again with the mirror's next
	// change.
	ReasonStatusRejected = "StatusRejected"
	// ReasonMirrorSuspended: the Job's suspension was carried to its
	// mirror, or the Job holds more than jobferry keeps of one
	// (ReasonOverBudget) and its mirror was suspended.
	ReasonMirrorSuspended = "MirrorSuspended"
	// ReasonMirrorResumed: the Job's resumption was carried to its mirror.
	ReasonMirrorResumed = "MirrorResumed"
	// ReasonMirrorUpdated: what the user changed on the running Job
	// (parallelism, completions, deadline, ...) was carried to its mirror.
	ReasonMirrorUpdated = "MirrorUpdated"
	// ReasonWorkerLost: the Job's worker has not answered for longer than
	// the worker-lost timeout: the Job is placed again elsewhere, or, with
	// jobferry.dev/on-worker-lost: Wait, waits for it.
	ReasonWorkerLost = "WorkerLost"
	// ReasonMissingRights: the credential of the Job's worker lacks rights
	// the mirror needs (the message names them); the Job is placed again.
	ReasonMissingRights = "WorkerMissingRights"
	// ReasonInvalidMirror: the mirror cannot be built from the Job, or a
	// change of the Job cannot be carried to it (the message says why).
	ReasonInvalidMirror = "InvalidMirror"
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
	// (managercache.OverBudget); nothing is done for it but suspending a
	// mirror of it that runs.
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
