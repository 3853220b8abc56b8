package v1alpha1

// Names fixed by the design so the manager, the worker, the webhook and the
// charts agree on them (see DESIGN.md, "Names").
const (
	// ManagerManagedBy is spec.managedBy of Jobs dispatched by the manager.
	ManagerManagedBy = "jobferry.dev/manager"
	// WorkerManagedBy is spec.managedBy of mirror Jobs run by the worker
	// binary's own Job controller.
	WorkerManagedBy = "jobferry.dev/worker"

	// OriginLabel names the jobferry installation that created a mirror.
	OriginLabel = "jobferry.dev/origin"
	// OriginUIDLabel is the UID of the manager Job a mirror stands for.
	OriginUIDLabel = "jobferry.dev/origin-uid"
	// DispatchAttemptLabel counts dispatches of the same manager Job.
	DispatchAttemptLabel = "jobferry.dev/dispatch-attempt"
	// AttemptSealLabel on a mirror seals its origin UID and dispatch
	// attempt under the manager's state key (jobstate.AttemptSeal): only
	// the mirrors the manager created tell it that a Job's state is older
	// than its latest attempt, however many Jobs with its labels others
	// make on a worker.
	AttemptSealLabel = "jobferry.dev/attempt-seal"
	// ManagerIDLabel names the manager installation that created a mirror
	// (its cluster and namespace, hashed): two managers given the same
	// origin by mistake tell their mirrors apart by it, and neither deletes
	// the other's.
	ManagerIDLabel = "jobferry.dev/manager-id"
	// AcceptsManagerLabelPrefix, followed by a manager installation's ID
	// (the ManagerIDLabel value of its mirrors), is the key of a label
	// that accepts that manager's Jobs, from the manager namespace of the
	// same name, in a worker's namespace jobferry did not create, set to
	// AcceptsManagerValue by the worker's administrator (AcceptsManagerLabel
	// gives it). Without it (or ManagerIDLabel) a namespace someone else
	// made is never dispatched into: its ServiceAccounts, quota and
	// policies are another team's. One key per manager, so one namespace
	// may accept several.
	AcceptsManagerLabelPrefix = "accepts-manager.jobferry.dev/"
	// AcceptsManagerValue is the value of an AcceptsManagerLabel that
	// accepts.
	AcceptsManagerValue = "true"
	// WorkerAnnotation on a manager Job names the WorkerCluster it is placed on.
	WorkerAnnotation = "jobferry.dev/worker"
	// WorkerLabel on a manager Job names the WorkerCluster it is placed on,
	// as WorkerAnnotation does, for kubectl get jobs -L and -l. Written with
	// the placement and removed when it is let go; jobferry never reads it
	// (the sealed annotation is the placement), and only jobferry's manager
	// may write it (the state policy).
	WorkerLabel = "jobferry.dev/worker"
	// ClusterSelectorAnnotation on a manager Job is a label selector over
	// WorkerCluster labels restricting where it may be placed.
	ClusterSelectorAnnotation = "jobferry.dev/cluster-selector"
	// DispatchNamespaceLabel opts every Job of a namespace into dispatch when
	// set to DispatchEnabled.
	DispatchNamespaceLabel = "jobferry.dev/dispatch"
	// DispatchEnabled is the value of DispatchNamespaceLabel that opts in.
	DispatchEnabled = "enabled"

	// DefaultPoolLabel is the node label that groups nodes into pools.
	DefaultPoolLabel = "jobferry.dev/pool"
	// ClusterCapacityName is the name of the ClusterCapacity singleton.
	ClusterCapacityName = "cluster"
)

// AcceptsManagerLabel is the key of the label that accepts the Jobs of the
// manager installation managerID in a worker's namespace
// (AcceptsManagerLabelPrefix).
func AcceptsManagerLabel(managerID string) string { return AcceptsManagerLabelPrefix + managerID }

// Annotations an administrator puts on a Kueue ClusterQueue (Kueue mode).
const (
	// QuotaFromCapacityAnnotation names the ResourceFlavor of the
	// ClusterQueue whose nominal quota jobferry keeps equal to the capacity
	// the eligible workers publish (connected, not cordoned, matching
	// QuotaClusterSelectorAnnotation when set).
	QuotaFromCapacityAnnotation = "jobferry.dev/quota-from-capacity"
	// QuotaClusterSelectorAnnotation, a label selector on WorkerClusters,
	// narrows the workers whose capacity makes the quota.
	QuotaClusterSelectorAnnotation = "jobferry.dev/quota-cluster-selector"
)

// Annotations and finalizer the manager keeps on manager Jobs.
const (
	// DispatchAttemptAnnotation on a manager Job is the attempt of its
	// current placement; the mirror carries it as DispatchAttemptLabel.
	DispatchAttemptAnnotation = "jobferry.dev/dispatch-attempt"
	// HeldForPlacementAnnotation marks a Job the opt-in webhook suspended
	// only to hold it until it is placed; the manager removes it in the update
	// that unsuspends the Job. A suspended Job without it was suspended by its
	// user, and jobferry leaves (or makes) its mirror suspended too.
	HeldForPlacementAnnotation = "jobferry.dev/held-for-placement"
	// ExcludedWorkersAnnotation lists workers (comma-separated) where a
	// same-named Job not created by jobferry blocks the mirror.
	ExcludedWorkersAnnotation = "jobferry.dev/excluded-workers"
	// InjectedDirectivesAnnotation records, as JSON, the directives injected
	// into the mirror only, when the manager Job's template was immutable.
	InjectedDirectivesAnnotation = "jobferry.dev/injected-directives"
	// UserSchedulingAnnotation records, as JSON, the pod template's
	// nodeSelector, tolerations and node affinity as the user wrote them,
	// before a worker's directives were merged into the template: a Job
	// placed again before it ran (its first worker refused the mirror) gets
	// the next worker's directives on the user's template, not on the first
	// worker's.
	UserSchedulingAnnotation = "jobferry.dev/user-scheduling"
	// OnWorkerLostAnnotation on a manager Job says what to do when its worker
	// is lost: OnWorkerLostRedispatch (default) or OnWorkerLostWait, for work
	// that must never run twice.
	OnWorkerLostAnnotation = "jobferry.dev/on-worker-lost"
	// OnWorkerLostRedispatch places the Job again on another worker.
	OnWorkerLostRedispatch = "Redispatch"
	// OnWorkerLostWait keeps the Job on its worker until it returns.
	OnWorkerLostWait = "Wait"
	// MirrorUIDAnnotation on a manager Job is the UID of the mirror jobferry
	// created for the current attempt: a Job on the worker with another UID,
	// whatever its labels say, is not the mirror.
	MirrorUIDAnnotation = "jobferry.dev/mirror-uid"
	// QueuedAnnotation on a manager Job records, sealed, the Kueue
	// LocalQueue it was first seen queued in: with Kueue, such a Job is
	// dispatched only through Kueue, whatever later happens to its
	// KueueQueueNameLabel.
	QueuedAnnotation = "jobferry.dev/queued"
	// KueueQueueNameLabel names the Kueue LocalQueue a Job is queued in
	// (Kueue's own label).
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// AdmittedPodsAnnotation on a manager Job records, as JSON
	// (AdmittedPods), what its namespace on the manager cluster admitted of
	// its pods when it was placed: the containers' resources as admission
	// set them (LimitRange defaults), which its mirror gets, and what its
	// pods charge to the namespace's ResourceQuotas while it runs
	// unfinished. Sealed (package manager/jobstate).
	AdmittedPodsAnnotation = "jobferry.dev/admitted-pods"
	// StateSealAnnotation on a manager Job seals jobferry's own annotations
	// (see package manager/jobstate): only the manager, which holds the key,
	// can write a seal that matches them, so state someone else wrote or
	// changed is never taken for jobferry's.
	StateSealAnnotation = "jobferry.dev/state-seal"
	// MirrorFinalizer held a manager Job until its mirror was deleted.
	// jobferry no longer adds it (the mirror of a deleted Job is deleted when
	// its deletion is seen, and by the orphan collector); it removes it from
	// Jobs an earlier version placed.
	MirrorFinalizer = "jobferry.dev/mirror"
)
