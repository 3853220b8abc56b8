// Command dashboards writes jobferry's Grafana dashboards (internal/dashboards)
// as JSON into the manager chart, which ships each as a ConfigMap for
// Grafana's dashboard sidecar.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jobferry/jobferry/internal/dashboards"
)

func main() {
	out := flag.String("out", "charts/jobferry-manager/dashboards", "directory to write the dashboards into")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range dashboards.All() {
		raw, err := d.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.UID+".json"), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}
