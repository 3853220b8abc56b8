// Package orphans deletes the mirrors whose manager Job is gone: Jobs
// deleted while their worker was unreachable, and attempts a later one
// replaced; the mirrors in worker namespaces being deleted
// (terminating.go); and, where the worker allows it, the worker namespaces
// this installation created once nothing needs them (namespaces.go). The
// collector subscribes to the pool for workers that (re)connect and
// decides in pure functions (orphans, collectNamespace).
package orphans
