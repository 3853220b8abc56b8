package installation

import (
	"testing"
)

func TestIDsDifferByClusterAndNamespace(t *testing.T) {
	a := hashID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system")
	if a != hashID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system") || len(a) != 16 {
		t.Errorf("hashID = %q: want 16 hex characters, the same every time", a)
	}
	if a == hashID("5d6c2b1e-0000-4000-8000-000000000002", "jobferry-system") || a == hashID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-b") {
		t.Error("two installations share an id")
	}
}
