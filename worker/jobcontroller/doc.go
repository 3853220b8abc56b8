// Package jobcontroller is the worker's own Job controller. It runs the Jobs
// kube-controller-manager leaves alone because their spec.managedBy is
// jobferry.dev/worker (and, with ManageUnmanaged, ordinary Jobs on control
// planes that run no kube-controller-manager), with the semantics of the
// upstream controller in k8s.io/kubernetes v1.36 pkg/controller/job:
//
//   - pods up to parallelism and the remaining completions, NonIndexed and
//     Indexed, with expectations so a lagging cache never over-creates, and
//     the exponential back-off for replacing failed pods;
//   - tracking with the batch.kubernetes.io/job-tracking finalizer (KEP-2307):
//     finished pods go to status.uncountedTerminatedPods, lose the finalizer,
//     then move to the counters, at most 500 per write;
//   - podReplacementPolicy (KEP-3939) and status.terminating;
//   - suspend (KEP-2232) and the delayed terminal conditions of KEP-4368;
//   - podFailurePolicy, successPolicy and backoffLimitPerIndex.
//
// Its behaviour is checked against kube-controller-manager by the
// differential conformance suite in e2e/conformance_test.go. Decisions live
// in pure functions (indexes.go, pods.go, backoff.go, podfailurepolicy.go,
// successpolicy.go, perindex.go, conditions.go). sync.go is one Job sync
// (count, decide, manage pods), podcontrol.go its pod creations and
// deletions, tracking.go its status writes and finalizer removals,
// controller.go the event plumbing and the orphan pods.
package jobcontroller
