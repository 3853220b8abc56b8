// Package worker holds the worker side of jobferry. Today: the capacity
// publisher, which keeps the ClusterCapacity singleton up to date with a
// per-pool summary of the cluster's nodes and pods (Summarize), so the
// manager reads one small object per worker instead of watching its pods.
// Not built yet: the Job controller that runs mirror Jobs with managedBy
// jobferry.dev/worker (KEP-2307 tracking, KEP-3939 replacement, KEP-2232).
package worker
