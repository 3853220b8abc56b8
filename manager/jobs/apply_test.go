package jobs

import "testing"

// Every kind of step Next can decide has a handler.
func TestEveryStepKindHasAHandler(t *testing.T) {
	for kind, name := range stepNames {
		if stepHandlers[kind] == nil {
			t.Errorf("step %s has no handler", name)
		}
	}
	if len(stepHandlers) != len(stepNames) {
		t.Errorf("%d handlers for %d kinds of step", len(stepHandlers), len(stepNames))
	}
}
