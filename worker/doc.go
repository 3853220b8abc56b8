// Package worker holds the worker side of jobferry: the publisher of the
// ClusterCapacity summary and the Job controller that runs mirror Jobs with
// managedBy jobferry.dev/worker using the standard tracking (KEP-2307),
// replacement (KEP-3939) and suspend (KEP-2232) semantics.
//
// Not built yet: both roles arrive with their own issues.
package worker
