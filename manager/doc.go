// Package manager is the manager side of jobferry. Each of its packages has
// one owner:
//
//   - workers: the pool of connections to the worker clusters (a client,
//     caches, a credential and its renewal, rights, the Warning Events
//     watch per worker); it knows no manager Job and tells its subscribers
//     what happens on the workers. workerstest has the fakes every
//     package's unit tests share. Its Standby keeps a replica that does
//     not lead connected, read only, and says when its caches are warm.
//   - election: the leader election lock that stands for the lease only
//     once the replica is warm (Candidacy).
//   - workercluster: the WorkerCluster controller — phases over one worker
//     (workerFacts), a pure decision (decideWorker), one status write.
//   - jobs: the Job controller — readState (reads.go), the pure policy
//     (jobs/policy: Next, the Kueue decisions, waiting and Event reasons,
//     the write kinds, the placement transforms; fixtures for both in
//     policy/policytest), one handler per step kind (apply*.go); its
//     memories are typed, in memories.go, attempts.go, assume.go,
//     waitingroom.go.
//   - warnings: the forwarder of the workers' Warning Events to the manager
//     Jobs they are about; it subscribes to the pool, with its own loop and
//     memory.
//   - orphans: the collector of mirrors whose manager Job is gone.
//   - admission: the webhooks, the dispatch policy, the admission policies
//     and the webhook certificate.
//   - queue: Kueue mode (--kueue) — the AdmissionCheck controller, the
//     reading of a queued Job's Workload and jobferry's check on it
//     (queue/workload holds the pure View and CheckUpdate; the Job
//     controller's policy decides, in jobs/policy/queued.go), and the
//     ClusterQueue quota that follows the workers' capacity.
//   - uninstall: the chart's uninstall check — what the uninstall would
//     strand (workers, opted-in namespaces, unfinished Jobs); it only lists.
//   - metrics: every metric vector; managercache: what the manager caches of
//     its own cluster and the placement indexes; jobstate: the sealed state;
//     cachebudget: the budgets of what any cache keeps of an object someone
//     else writes.
//
// This package holds the list of every metric (Collectors). cmd/manager
// wires the parts: the pool to the WorkerCluster controller, the Job
// controller, the Warning forwarder and the orphan collector; the dispatch
// policy to the webhooks and the Job controller. Decisions live in pure
// functions — policy.Next, policy.Placement, decideWorker, orphans,
// dispatch.Place, the placement transforms of jobs/policy,
// planWorkerNamespace — and the controllers read, call them and write what
// changed.
package manager
