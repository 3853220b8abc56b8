// Package manager is the manager side of jobferry: the WorkerCluster
// registry (a client, caches and a credential per worker, registry.go,
// remote.go, renewal.go), the Job controller that places manager Jobs,
// creates their mirrors and copies status back (jobs.go: readState, the
// pure nextStep in step.go, apply) and the orphan collector (gc.go). The
// webhooks, the dispatch policy and the admission policies are package
// admission's. Decisions live in pure functions — nextStep, decideWorker,
// orphans, dispatch.Place, the transforms of placement.go,
// planWorkerNamespace — and the reconcilers read, call them and write what
// changed.
package manager
