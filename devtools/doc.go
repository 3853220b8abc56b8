// Package devtools holds the development tooling of jobferry, under its
// packages: local clusters made of real control-plane processes
// (localcluster), jobferry installed on them (devenv), the benchmarks
// (bench), simulated workers (simworker), tenants following logs (follow)
// and the chaos run (chaos). The end-to-end tests (e2e), `jobferry-dev` and
// `make bench` use them; no product binary links them.
package devtools
