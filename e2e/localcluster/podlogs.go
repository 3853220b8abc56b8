package localcluster

import (
	"fmt"
	"strings"
)

// Pod logs on the local clusters. There is no container runtime: KWOK
// answers the API server's pods/log requests (as a kubelet's /containerLogs
// endpoint) from a file in CRI log format, named by a ClusterLogs rule in its
// configuration. Every container of a cluster shows the same lines, which
// name the cluster, so a test can tell which cluster served a log.

// ContainerLogLines are the lines every container of the cluster shows
// through pods/log.
func ContainerLogLines(cluster string) []string {
	return []string{
		fmt.Sprintf("container started on cluster %s", cluster),
		fmt.Sprintf("work done on cluster %s", cluster),
	}
}

// containerLogFile is the CRI-format file KWOK serves the lines from.
func containerLogFile(cluster string) string {
	var b strings.Builder
	for _, line := range ContainerLogLines(cluster) {
		fmt.Fprintf(&b, "2026-01-01T00:00:00.000000000Z stdout F %s\n", line)
	}
	return b.String()
}

// kwokConfig is KWOK's configuration: the stages, and a ClusterLogs rule
// serving logsFile for every container of every pod.
func kwokConfig(logsFile string) []byte {
	return []byte(string(kwokStages) + fmt.Sprintf(`
---
kind: ClusterLogs
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: every-container
spec:
  logs:
  - logsFile: %q
`, logsFile))
}
