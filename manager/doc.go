// Package manager wires the manager side of jobferry: the opt-in webhook, the
// WorkerCluster registry holding a client and a cache per worker, and the
// controllers that place manager Jobs (package dispatch), create their mirrors
// and copy status back (package mirror). Decisions live in dispatch and
// mirror; this package reads, calls them, and writes what changed.
//
// Not built yet: the registry, webhook and controllers arrive with the
// dispatch issue.
package manager
