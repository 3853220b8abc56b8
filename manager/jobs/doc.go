// Package jobs is the manager's Job controller: it places each manager Job
// on a worker (dispatch.Place), creates its mirror there, carries spec
// changes, copies the mirror's status back and deletes the mirror when it is
// done. A reconcile reads (readState), decides in the pure Next
// (step.go, pinned by a table) and applies the step (apply.go: one handler
// per step kind, in applyplacement.go and applymirror.go). What it is told
// of the workers arrives through its subscription to the pool
// (jobevents.go); Jobs no worker has room for wait in the waiting room
// (waitingroom.go) and show why in their Suspended condition
// (waitingcondition.go); a write the API server refuses becomes a Warning
// Event (refusals.go); the workers' Warning Events are forwarded to the
// Jobs they are about (workerwarnings.go). Its memories are typed, one
// store each (memories.go, attempts.go, assume.go).
package jobs
