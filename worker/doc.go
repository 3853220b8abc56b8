// Package worker holds the worker side of jobferry's capacity reporting: the
// capacity publisher, which keeps the ClusterCapacity singleton up to date
// with a per-pool summary of the cluster's nodes and pods (Summarize), so the
// manager reads one small object per worker instead of watching its pods,
// and the pod cache trimming shared with the worker's Job controller
// (package worker/jobcontroller).
package worker
