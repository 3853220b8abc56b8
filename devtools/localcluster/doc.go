// Package localcluster starts and stops real Kubernetes control planes as local
// processes: etcd, kube-apiserver (TLS from a CA generated per environment),
// kube-controller-manager, kube-scheduler and KWOK faking nodes and pod
// lifecycles. The binaries come from bin/ (built by `make tools` from
// hack/tools). The e2e tests, the dev environment (`jobferry-dev up`), the demo
// and the benchmarks all use it.
//
// Every process is stopped by PID: on Stop, on SIGINT/SIGTERM of the process
// that started it, and, as a backstop when that process dies without cleaning
// up, by the kernel (Pdeathsig). Clusters started Detached outlive their
// starter and are stopped later from the state file (StopEnvironment).
package localcluster
