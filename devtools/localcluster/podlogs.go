package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
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

// containerLogPath is the file KWOK serves every container's log from, in
// the cluster's directory dir.
func containerLogPath(dir string) string { return filepath.Join(dir, "logs", "containers.log") }

// AppendContainerLog adds lines to what every container of the cluster
// shows: KWOK reads the file as a kubelet reads a container's log, following
// it, so every followed log of a pod there streams them.
func (c *Cluster) AppendContainerLog(lines ...string) error {
	var b strings.Builder
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, line := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", now, line)
	}
	f, err := os.OpenFile(containerLogPath(c.Dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%s: appending to its containers' log: %w", c.Name, err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("%s: appending to its containers' log: %w", c.Name, err)
	}
	return f.Close()
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
