// Package workers holds the manager's connections to its worker clusters:
// Pool, one Connection per WorkerCluster (a client whose reads come from
// caches holding only this installation's mirrors and the worker's
// ClusterCapacity), the credential in it and its renewal (credential.go,
// renewal.go), the rights it is reviewed for (rights.go) and the watch of
// the worker's Warning Events (warnings.go). It knows no manager Job:
// what happens on the workers reaches the Job controller and the orphan
// collector through Subscribe and SubscribeConnected. Conn is the part of a
// connection they use; workerstest fakes it for their unit tests.
package workers
