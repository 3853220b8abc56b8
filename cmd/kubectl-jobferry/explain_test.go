package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	inspectionv1alpha1 "github.com/jobferry/jobferry/api/inspection/v1alpha1"
)

func TestReadJobFile(t *testing.T) {
	dir := t.TempDir()
	const job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  namespace: team-a\n"
	for name, tc := range map[string]struct {
		content, says string
	}{
		"one Job":          {job, ""},
		"one Job in JSON":  {`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"train","namespace":"team-a"}}`, ""},
		"a Job after ---":  {"---\n" + job + "---\n", ""},
		"two Jobs":         {job + "---\n" + job, "holds 2 objects: explain takes one Job at a time"},
		"nothing":          {"# a comment\n", "holds no object"},
		"a Pod":            {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", `holds a Pod of "v1", not a Job of batch/v1`},
		"not YAML or JSON": {"{{", "reading the Job to explain"},
		"over the limit":   {job + "  annotations:\n    a: " + strings.Repeat("x", inspectionv1alpha1.MaxPlacementRequestBytes) + "\n", "the most the manager explains"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readJobFile(path, nil)
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("want an error saying %q, got %v", tc.says, err)
				}
				return
			}
			if err != nil || got.GetName() != "train" || got.GetNamespace() != "team-a" {
				t.Errorf("got %v, %v", got, err)
			}
		})
	}
	got, err := readJobFile("-", strings.NewReader(job))
	if err != nil || got.GetName() != "train" {
		t.Errorf("from standard input: %v, %v", got, err)
	}
}

func TestPrintExplanation(t *testing.T) {
	nowhere := &inspectionv1alpha1.PlacementExplanation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", GenerateName: "big-"},
		Reason:     "no worker has room for it now",
		Workers: []inspectionv1alpha1.WorkerVerdict{
			{Name: "worker-1", Code: "insufficient_capacity", Reason: "pool general: needs 100 cpu, 2 free", Change: "pool general needs 98 more cpu"},
			{Name: "worker-2", Code: "cordoned", Reason: "cordoned", Change: "uncordon it: kubectl jobferry uncordon worker-2"},
		},
		Notes: []string{"the Job is not created yet"},
	}
	var out strings.Builder
	if err := printExplanation(&out, nowhere, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Job team-a/big-* would go nowhere now: no worker has room for it now\n",
		"WORKER    VERDICT                WHY\n",
		"worker-1  insufficient_capacity  pool general: needs 100 cpu, 2 free\n",
		"                                 change: pool general needs 98 more cpu\n",
		"worker-2  cordoned",
		"\nNotes:\n  the Job is not created yet\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, out.String())
		}
	}

	chosen := &inspectionv1alpha1.PlacementExplanation{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}, Worker: "worker-2", Pool: "general", Reason: "the freest",
		Workers: []inspectionv1alpha1.WorkerVerdict{{Name: "worker-1", Reason: "worker-2 keeps more free"}, {Name: "worker-2", Chosen: true}}}
	out.Reset()
	if err := printExplanation(&out, chosen, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Job team-a/train would go to worker worker-2, pool general: the freest\n", "worker-1  would take it  worker-2 keeps more free\n", "worker-2  chosen"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printExplanation(&out, chosen, "json"); err != nil || !strings.Contains(out.String(), `"worker": "worker-2"`) {
		t.Errorf("-o json: %v\n%s", err, out.String())
	}
}

func TestExplainError(t *testing.T) {
	byManager := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("User \"u\" cannot create resource \"jobs\""))
	byAPIServer := apierrors.NewForbidden(schema.GroupResource{Group: "inspection.jobferry.dev", Resource: "placements"}, "", errors.New("User \"u\" cannot create resource \"placements\""))
	if got := explainError("Job a/b", true, byManager).Error(); strings.Contains(got, "ClusterRole") {
		t.Errorf("the manager's refusal: %s; want no role named (the manager's message says what is missing)", got)
	}
	if got := explainError("Job a/b", true, byAPIServer).Error(); !strings.Contains(got, "ClusterRole jobferry-manager-placements") {
		t.Errorf("the API server's refusal of create placements: %s", got)
	}
	if got := explainError("Job a/b", false, byAPIServer).Error(); !strings.Contains(got, "ClusterRole jobferry-manager-inspection (get jobs/placement)") {
		t.Errorf("the API server's refusal of get jobs/placement: %s", got)
	}
}
