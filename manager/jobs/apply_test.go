package jobs

import (
	"testing"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// Every kind of step Next can decide has a handler.
func TestEveryStepKindHasAHandler(t *testing.T) {
	kinds := policy.Kinds()
	for _, kind := range kinds {
		if stepHandlers[kind] == nil {
			t.Errorf("step %s has no handler", kind)
		}
	}
	if len(stepHandlers) != len(kinds) {
		t.Errorf("%d handlers for %d kinds of step", len(stepHandlers), len(kinds))
	}
}
