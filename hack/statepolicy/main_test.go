package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The charts ship the policies the code defines.
func TestChartPoliciesAreCurrent(t *testing.T) {
	for i, p := range policies {
		want, err := spec(i)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("../..", p.file))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale or missing (%v): run `make generate` (go run ./hack/statepolicy)", p.file, err)
		}
	}
}
