package policy

import (
	"slices"
	"testing"
)

// Every reason of the Suspended condition jobferry writes maps to one of
// the metric's, and each of the metric's has one.
func TestWaitingReasonsCoverTheConditions(t *testing.T) {
	seen := map[string]bool{}
	for reason, label := range waitingByReason {
		if !slices.Contains(waitingReasons, label) {
			t.Errorf("condition reason %s maps to %q, not one of the metric's reasons", reason, label)
		}
		seen[label] = true
	}
	for _, label := range waitingReasons {
		if !seen[label] && label != WaitingWorkerLost {
			t.Errorf("the metric's reason %q comes from no condition reason", label)
		}
	}
}
