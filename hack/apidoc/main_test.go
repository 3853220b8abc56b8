package main

import (
	"os"
	"strings"
	"testing"
)

// The API reference is what the CustomResourceDefinitions declare.
func TestAPIReferenceIsCurrent(t *testing.T) {
	want, err := markdown("../../api/v1alpha1/crds")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/reference/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/reference/api.md is stale: run `make generate` (go run ./hack/apidoc)")
	}
	for _, field := range []string{"spec.kubeConfig.secretRef.name", "spec.cordoned", "status.conditions", "status.pools[].free"} {
		if !strings.Contains(want, "| `"+field+"` |") {
			t.Errorf("the reference has no row for %s", field)
		}
	}
}
