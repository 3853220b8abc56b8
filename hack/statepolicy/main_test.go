package main

import (
	"bytes"
	"os"
	"testing"
)

// The chart ships the policy the code defines.
func TestChartStatePolicyIsCurrent(t *testing.T) {
	want, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../charts/jobferry-manager/files/state-policy.yaml")
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("charts/jobferry-manager/files/state-policy.yaml is stale or missing (%v): run `make generate` (go run ./hack/statepolicy)", err)
	}
}
