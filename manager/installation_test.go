package manager

import (
	"testing"
)

func TestInstallationID(t *testing.T) {
	a := installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system")
	if a != installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-system") || len(a) != 16 {
		t.Errorf("installationID = %q: want 16 hex characters, the same every time", a)
	}
	if a == installationID("5d6c2b1e-0000-4000-8000-000000000002", "jobferry-system") || a == installationID("5d6c2b1e-0000-4000-8000-000000000001", "jobferry-b") {
		t.Error("two installations share an id")
	}
}
