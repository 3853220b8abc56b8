// Package orphans deletes the mirrors whose manager Job is gone: Jobs
// deleted while their worker was unreachable, and attempts a later one
// replaced. The collector subscribes to the pool for workers that
// (re)connect and decides in a pure function (orphans).
package orphans
