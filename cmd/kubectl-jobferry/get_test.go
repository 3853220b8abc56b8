package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubectl/pkg/cmd/get"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Every -o of get jobs prints what kubectl's would, with jobferry's columns
// in the table.
func TestGetJobsOutput(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	job := func(name, worker string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
				Annotations: map[string]string{v1alpha1.WorkerAnnotation: worker, v1alpha1.DispatchAttemptAnnotation: "1"}},
			Spec: batchv1.JobSpec{Completions: ptr.To[int32](1), ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)},
		}
	}
	jobs := []*batchv1.Job{job("train", "worker-1"), job("eval", "worker-2")}
	for _, tc := range []struct {
		name, output  string
		noHeaders     bool
		withNamespace bool
		one           bool
		want          string
	}{
		{name: "table", want: "NAME    STATUS    COMPLETIONS   DURATION   AGE   WORKER     ATTEMPT\ntrain   Running   0/1                      60s   worker-1   1\neval    Running   0/1                      60s   worker-2   1\n"},
		{name: "all namespaces, wide, no headers", output: "wide", noHeaders: true, withNamespace: true,
			want: "team-a   train   Running   0/1      60s   worker-1   1   yes\nteam-a   eval    Running   0/1      60s   worker-2   1   yes\n"},
		{name: "name", output: "name", want: "job.batch/train\njob.batch/eval\n"},
		{name: "jsonpath", output: `jsonpath={.metadata.name}={.metadata.annotations.jobferry\.dev/worker}{"\n"}`, want: "train=worker-1\neval=worker-2\n"},
		{name: "go-template", output: `go-template={{.metadata.name}} {{index .metadata.annotations "jobferry.dev/worker"}}{{"\n"}}`, want: "train worker-1\neval worker-2\n"},
		{name: "custom-columns", output: `custom-columns=NAME:.metadata.name,WORKER:.metadata.annotations.jobferry\.dev/worker`, want: "NAME    WORKER\ntrain   worker-1\neval    worker-2\n"},
		{name: "custom-columns, no headers", output: `custom-columns=NAME:.metadata.name,WORKER:.metadata.annotations.jobferry\.dev/worker`, noHeaders: true, want: "train   worker-1\neval    worker-2\n"},
		{name: "yaml of one Job is the Job", output: "yaml", one: true, want: "apiVersion: batch/v1\nkind: Job\n"},
		{name: "json of two is a List", output: "json", want: "\"kind\": \"List\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &getJobsOptions{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme), customColumns: get.NewCustomColumnsPrintFlags(), noHeaders: tc.noHeaders}
			g.print.OutputFormat = ptr.To(tc.output)
			p, err := g.printer()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			o := &jobOutput{printer: p, out: &out, withNamespace: tc.withNamespace, now: now}
			in := jobs
			if tc.one {
				in = jobs[:1]
			}
			for _, j := range in {
				if err := o.add(j); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.flush(); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			if (strings.HasPrefix(tc.output, "json") && tc.output == "json") || tc.output == "yaml" {
				if !strings.Contains(got, tc.want) {
					t.Errorf("-o %s printed\n%s\nwant it to contain %q", tc.output, got, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("-o %s printed\n%q\nwant\n%q", tc.output, got, tc.want)
			}
		})
	}
}

// An unknown format is refused with the known ones.
func TestGetJobsUnknownOutput(t *testing.T) {
	g := &getJobsOptions{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme), customColumns: get.NewCustomColumnsPrintFlags()}
	g.print.OutputFormat = ptr.To("xml")
	if _, err := g.printer(); err == nil || !strings.Contains(err.Error(), "jsonpath") || !strings.Contains(err.Error(), "custom-columns") {
		t.Errorf("-o xml: %v, want an error listing the formats", err)
	}
}
