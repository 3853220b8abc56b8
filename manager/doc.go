// Package manager is the manager side of jobferry: the WorkerCluster
// registry (a client, caches and a credential per worker, registry.go,
// remote.go, renewal.go), the Job controller that places manager Jobs,
// creates their mirrors and copies status back (jobs.go: readState, the
// pure nextStep in step.go, apply), the orphan collector (gc.go), the
// opt-in and validating webhooks with the dispatch policy (webhook.go,
// policy.go) and the admission policies the charts ship (statepolicy.go,
// namespacepolicy.go). Decisions live in pure functions — nextStep,
// dispatch.Place, the transforms of placement.go, planWorkerNamespace — and
// the reconcilers read, call them and write what changed.
package manager
