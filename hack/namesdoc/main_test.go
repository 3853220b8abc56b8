package main

import (
	"os"
	"strings"
	"testing"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/dispatch"
	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// The names reference is what the code defines.
func TestNamesReferenceIsCurrent(t *testing.T) {
	want, err := markdown("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/reference/names.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/reference/names.md is stale: run `make generate` (go run ./hack/namesdoc)")
	}
	// One of each kind, as the code spells it: a section that reads
	// nothing fails here rather than printing an empty table.
	for _, name := range []string{v1alpha1.WorkerAnnotation, v1alpha1.OriginLabel, policy.ReasonDispatched, policy.WriteMirror.Reason,
		policy.ReasonWaitingForWorker, v1alpha1.ReasonCredentialRejected, v1alpha1.ConditionConnected, dispatch.ReasonNamespaceUnreadable} {
		if !strings.Contains(want, "| `"+name+"` |") {
			t.Errorf("the reference lists no %s", name)
		}
	}
}
