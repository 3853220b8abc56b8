package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
)

func newExplainCommand(o *options) *cobra.Command {
	var file, output string
	explain := &cobra.Command{
		Use:   "explain (-f FILE | job NAME)",
		Short: "Where a Job would go now, and for a worker that would not take it, what would have to change",
		Long: `Where a Job would go now: the worker and pool the manager would place it on,
every other worker's reason, and for a Job no worker takes the nearest change
that would let each take it (the pool and resource short, the selector no
worker matches, the namespace or right missing). The manager answers, on what
it knows of the workers this moment, with your rights: a Job sent with -f
(not created) to who may create Jobs in its namespace, an existing Job to who
may get it.`,
		Example: `  kubectl jobferry explain -f job.yaml
  kubectl jobferry explain job train -n team-a -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("name a Job to explain: -f FILE (a Job not created yet; - reads standard input) or job NAME (an existing Job)")
			}
			if err := checkReportFormat(output); err != nil {
				return err
			}
			job, err := readJobFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			ns := job.GetNamespace()
			if given := ptr.Deref(o.flags.Namespace, ""); given != "" && ns != "" && given != ns {
				// As kubectl create -f refuses it.
				return fmt.Errorf("the namespace from the provided object %q does not match the namespace %q: pass one or the other", ns, given)
			}
			if ns == "" {
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			m, err := o.manager()
			if err != nil {
				return err
			}
			body, err := job.MarshalJSON()
			if err != nil {
				return err
			}
			e, err := m.explain(cmd.Context(), inspectionv1alpha1.PlacementsPath(ns), body, "Job "+describedName(ns, job.GetName(), job.GetGenerateName()))
			if err != nil {
				return err
			}
			return printExplanation(o.streams.Out, e, output)
		},
	}
	explain.Flags().StringVarP(&file, "filename", "f", "", "a file holding the Job (YAML or JSON; - for standard input)")
	explain.PersistentFlags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: text)")
	explain.AddCommand(&cobra.Command{
		Use:               "job NAME",
		Short:             "Where an existing Job would go now (a waiting Job: why it waits)",
		ValidArgsFunction: completeJobs(o, false),
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReportFormat(output); err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			m, err := o.manager()
			if err != nil {
				return err
			}
			e, err := m.explain(cmd.Context(), inspectionv1alpha1.Path(ns, args[0], inspectionv1alpha1.PlacementSubresource), nil, "Job "+ns+"/"+args[0])
			if err != nil {
				return err
			}
			return printExplanation(o.streams.Out, e, output)
		},
	})
	return explain
}

// readJobFile reads the one object of a YAML or JSON file (- for in), which
// must be a Job: the manager would refuse anything else, but a file of
// several objects is better refused here, naming it.
func readJobFile(file string, in io.Reader) (*unstructured.Unstructured, error) {
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading the Job to explain: %w", err)
		}
		defer f.Close()
		in = f
	}
	// A byte past the manager's limit says the file is over it.
	data, err := io.ReadAll(io.LimitReader(in, inspectionv1alpha1.MaxPlacementRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the Job to explain: %w", err)
	}
	if len(data) > inspectionv1alpha1.MaxPlacementRequestBytes {
		return nil, fmt.Errorf("%s is over %d bytes, the most the manager explains", file, inspectionv1alpha1.MaxPlacementRequestBytes)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objects []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading the Job to explain from %s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			objects = append(objects, obj)
		}
	}
	switch {
	case len(objects) == 0:
		return nil, fmt.Errorf("%s holds no object: explain takes one Job", file)
	case len(objects) > 1:
		return nil, fmt.Errorf("%s holds %d objects: explain takes one Job at a time", file, len(objects))
	}
	if gvk := objects[0].GroupVersionKind(); gvk.Group != "batch" || gvk.Kind != "Job" {
		return nil, fmt.Errorf("%s holds a %s of %q, not a Job of batch/v1", file, gvk.Kind, gvk.GroupVersion())
	}
	return objects[0], nil
}

func describedName(ns, name, generateName string) string {
	if name == "" {
		name = generateName + "*"
	}
	return ns + "/" + name
}

// explain asks the manager's inspection API where a Job would go: a POST of
// body to path, or a GET of path when body is nil.
func (m *managerClients) explain(ctx context.Context, path string, body []byte, what string) (*inspectionv1alpha1.PlacementExplanation, error) {
	rest := m.kube.Discovery().RESTClient()
	req := rest.Get().AbsPath(path)
	if body != nil {
		req = rest.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body(body)
	}
	// Stream, not DoRaw: the Status of a refusal is decoded only from a
	// stream (as inspect).
	stream, err := req.Stream(ctx)
	if err != nil {
		return nil, explainError(what, body != nil, err)
	}
	defer stream.Close()
	data, err := io.ReadAll(stream)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's explanation of %s: %w", what, err)
	}
	out := &inspectionv1alpha1.PlacementExplanation{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("reading the manager's explanation of %s: %w", what, err)
	}
	return out, nil
}

// printExplanation prints e as -o asks, or as text: the decision, then each
// worker's verdict and the change that would let it take the Job.
func printExplanation(out io.Writer, e *inspectionv1alpha1.PlacementExplanation, output string) error {
	if printed, err := printReport(out, e, output); printed || err != nil {
		return err
	}
	name := describedName(e.Namespace, e.Name, e.GenerateName)
	switch {
	case e.Held != "":
		fmt.Fprintf(out, "Job %s would wait before any worker is looked at: %s\n", name, e.Held)
	case e.Worker != "":
		fmt.Fprintf(out, "Job %s would go to worker %s, pool %s: %s\n", name, e.Worker, e.Pool, e.Reason)
	default:
		fmt.Fprintf(out, "Job %s would go nowhere now: %s\n", name, e.Reason)
	}
	if e.Never != "" {
		fmt.Fprintf(out, "No worker could ever run it as the workers are: %s\n", e.Never)
	}
	if len(e.Workers) > 0 {
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKER\tVERDICT\tWHY")
		for _, v := range e.Workers {
			verdict := v.Code
			switch {
			case v.Chosen:
				verdict = "chosen"
			case v.Code == "":
				verdict = "would take it"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, verdict, v.Reason)
			if v.Change != "" {
				fmt.Fprintf(tw, "\t\tchange: %s\n", v.Change)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for i, note := range e.Notes {
		if i == 0 {
			fmt.Fprintln(out, "\nNotes:")
		}
		fmt.Fprintf(out, "  %s\n", note)
	}
	return nil
}

// explainError explains what the inspection API refused an explanation
// for: the manager's own refusal (the caller may not create Jobs there, or
// get the Job) says it all; the API server's names the role that grants it.
func explainError(what string, sent bool, err error) error {
	var status apierrors.APIStatus
	if apierrors.IsForbidden(err) && errors.As(err, &status) {
		if details := status.Status().Details; details != nil && details.Group == batchv1.GroupName {
			return fmt.Errorf("asking where %s would go: %w", what, err)
		}
		role := "jobferry-manager-inspection (get jobs/placement)"
		if sent {
			role = "jobferry-manager-placements (create placements)"
		}
		return fmt.Errorf("asking where %s would go: %w (an administrator grants it: ClusterRole %s in the namespace; with the chart's defaults view may explain existing Jobs, edit and admin Jobs not created yet)", what, err, role)
	}
	return inspectionError("where "+what+" would go", err)
}
