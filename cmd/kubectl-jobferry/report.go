package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"sigs.k8s.io/yaml"
)

// reportFormats are the -o of the commands that print a report of their own
// (status, version): json or yaml, or "" for their text.
var reportFormats = []string{"", "json", "yaml"}

// checkReportFormat refuses an -o a report command does not print.
func checkReportFormat(output string) error {
	if !slices.Contains(reportFormats, output) {
		return fmt.Errorf("--output %q: use json or yaml", output)
	}
	return nil
}

// printReport prints a report as -o json or yaml asks; false for the text
// format, which the command prints itself.
func printReport(out io.Writer, report any, output string) (bool, error) {
	var data []byte
	var err error
	switch output {
	case "json":
		if data, err = json.MarshalIndent(report, "", "  "); err == nil {
			data = append(data, '\n')
		}
	case "yaml":
		data, err = yaml.Marshal(report)
	default:
		return false, nil
	}
	if err != nil {
		return true, err
	}
	_, err = out.Write(data)
	return true, err
}
