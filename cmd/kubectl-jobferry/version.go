package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobferry/jobferry/internal/buildinfo"
)

// versionReport is what `version` shows; -o json|yaml prints it as it is.
type versionReport struct {
	Client buildinfo.Info `json:"client"`
	// Manager are the manager's pods with the version each runs (the
	// chart's app.kubernetes.io/version) and its image; empty with --client.
	Manager []managerPodVersion `json:"manager,omitempty"`
	// ManagerError says why the manager's version is not known.
	ManagerError string `json:"managerError,omitempty"`
}

type managerPodVersion struct {
	Pod     string `json:"pod"`
	Version string `json:"version"`
	Image   string `json:"image"`
}

func newVersionCommand(o *options) *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the version of the manager's pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat(output); err != nil {
				return err
			}
			report := versionReport{Client: buildinfo.Read()}
			if !clientOnly {
				report.Manager, report.ManagerError = managerVersions(cmd.Context(), o)
			}
			return printVersion(o.streams.Out, report, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only, without reaching the manager cluster")
	return cmd
}

// managerVersions reads the manager's pods in its namespace; an error is
// said, not returned: the plugin's own version is worth printing anyway.
func managerVersions(ctx context.Context, o *options) ([]managerPodVersion, string) {
	m, err := o.manager()
	if err != nil {
		return nil, err.Error()
	}
	pods, err := m.kube.CoreV1().Pods(o.systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerPodSelector})
	if err != nil {
		return nil, fmt.Sprintf("listing the manager's pods in %s: %v", o.systemNamespace, err)
	}
	versions := podVersions(pods.Items)
	if len(versions) == 0 {
		return nil, fmt.Sprintf("no manager pods (%s) in %s: is the manager chart installed there (--jobferry-namespace)?", managerPodSelector, o.systemNamespace)
	}
	return versions, ""
}

// podVersions are the manager pods' versions, by pod name.
func podVersions(pods []corev1.Pod) []managerPodVersion {
	var out []managerPodVersion
	for _, p := range pods {
		v := managerPodVersion{Pod: p.Name, Version: p.Labels["app.kubernetes.io/version"]}
		for _, c := range p.Spec.Containers {
			if c.Name == "manager" || len(p.Spec.Containers) == 1 {
				v.Image = c.Image
			}
		}
		if v.Version == "" {
			v.Version = "unknown"
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b managerPodVersion) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

func printVersion(out io.Writer, r versionReport, output string) error {
	if printed, err := printReport(out, r, output); printed || err != nil {
		return err
	}
	fmt.Fprintf(out, "Client Version: %s (revision %s, %s)\n", r.Client.Version, r.Client.Revision, r.Client.GoVersion)
	switch {
	case r.ManagerError != "":
		fmt.Fprintf(out, "Manager Version: unknown: %s\n", r.ManagerError)
	case len(r.Manager) > 0:
		var versions []string
		for _, p := range r.Manager {
			if !slices.Contains(versions, p.Version) {
				versions = append(versions, p.Version)
			}
		}
		fmt.Fprintf(out, "Manager Version: %s\n", strings.Join(versions, ", "))
		for _, p := range r.Manager {
			fmt.Fprintf(out, "  %s: %s (%s)\n", p.Pod, p.Version, p.Image)
		}
	}
	return nil
}
