// Command metricsdoc writes the metrics reference, docs/reference/metrics.md, from the
// collectors of the manager and worker binaries.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/jobferry/jobferry/internal/buildinfo"
	"github.com/jobferry/jobferry/internal/metricsdoc"
	"github.com/jobferry/jobferry/manager"
	"github.com/jobferry/jobferry/worker/jobcontroller"
)

func sections() []metricsdoc.Section {
	return []metricsdoc.Section{
		{
			Title:      "Manager (`jobferry-manager`)",
			Intro:      "Served on the manager's metrics endpoint (HTTPS on :8443 in the chart). `worker` is a WorkerCluster's name.",
			Collectors: append(manager.Collectors(), buildinfo.Collector("manager")),
		},
		{
			Title:      "Worker (`jobferry-worker`)",
			Intro:      "Served by the worker binary on each worker cluster: its Job controller, named like kube-controller-manager's `job_controller` metrics. With `--worker-name` (the worker chart's `workerName`) each series carries `worker`, the WorkerCluster's name.",
			Collectors: append(jobcontroller.Collectors(), buildinfo.Collector("worker")),
		},
	}
}

func main() {
	out := flag.String("out", "docs/reference/metrics.md", "file to write")
	flag.Parse()
	doc, err := metricsdoc.Markdown(sections())
	if err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}
