// Package jobs is the manager's Job controller: it places each manager Job
// on a worker (dispatch.Place), creates its mirror there, carries spec
// changes, copies the mirror's status back and deletes the mirror when it is
// done. A reconcile reads (reads.go: readState and every read it makes),
// decides in the pure policy.Next (package policy, pinned by tables) and
// applies the step (apply.go: one handler per step kind, in
// applyplacement.go, applymirror.go and applyqueue.go); the Events a step
// says go out once its writes succeeded (announce.go). What it is told of
// the workers arrives through its subscription to the pool (jobevents.go);
// Jobs no worker has room for wait in the waiting room (waitingroom.go) and
// show why in their Suspended condition (policy.Waiting, written by
// statuswrite.go); a write the API server refuses becomes a Warning Event
// and is not made again until the Job changes (refusals.go,
// policy.Writes). Its memories are typed, one store each (memories.go,
// attempts.go, assume.go).
package jobs
