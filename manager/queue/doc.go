// Package queue is the manager's side of Kueue, when Kueue queues the
// manager's Jobs (the manager's --kueue): Kueue decides when a Job runs
// (quota, fair sharing, priority, preemption), jobferry where, as Kueue's
// external admission check (controllerName ControllerName).
//
// It owns:
//   - the AdmissionCheck controller (checks.go): it keeps the checks that
//     name jobferry Active, or their ClusterQueues stay inactive;
//   - reading a queued Job's Workload for the Job controller (Queue.View,
//     a workload.View: package workload holds the pure summary and the
//     CheckUpdate the policy answers with) and the one write it makes
//     there: its own entry of status.admissionChecks, applied server-side
//     under its own field manager so the other checks' entries are never
//     touched (Queue.SetCheck, checkentry.go).
//
// The Job controller (package jobs) decides, in its policy.Next, what a
// queued Job needs: placing it once Kueue reserved quota with the check
// Pending, reporting the placement as the check Ready with the worker's
// directives as pod set updates, creating the mirror once Kueue unsuspends
// the Job, suspending it when Kueue does and letting the placement go once
// it drained. This package knows no placement policy.
package queue
