// Package e2e holds the end-to-end tests of jobferry. They run against real
// control planes started as local processes by devtools/localcluster, and
// are compiled only with the e2e build tag (`make test-e2e`).
package e2e
