// Package workercluster is the WorkerCluster controller: it keeps each
// worker's connection in the pool (package workers) in step with its
// WorkerCluster and kubeconfig Secret, and writes what it finds in the
// status. A reconcile runs phases that read the worker (workerFacts),
// decides in a pure function (decideWorker, pinned by a table) and writes
// the status once. The Job counts come from watching manager Jobs
// (jobcounts.go), not from calls out of the Job controller.
package workercluster
