// Package warnings forwards the workers' Warning Events to the manager
// Jobs they are about.
//
// Why a mirror does not run is seen on its worker: the scheduler finds no
// node (FailedScheduling), a kubelet cannot start a container, a pod is
// evicted, the Job controller gives up. The manager watches each worker's
// Warning Events (when its credential may: warningEventsRights) and records
// those about its mirrors and their pods as Warning Events on the manager
// Jobs, naming the worker and the pod, once per reason per pod, so
// `kubectl describe job` on the manager says why. The decisions (whose pod
// is it, is it still this Job's attempt, what does the Event say) are pure
// functions; forwardWarning does the reads and the write.
//
// It subscribes to the pool of connections (workers.Handlers.Warning) and
// runs its own loop, with its own memory of what it forwarded (warnedMemo,
// bounded per Job, per worker namespace and in time: what a worker reports
// is anyone's to write who may create Events or pods there).
package warnings
