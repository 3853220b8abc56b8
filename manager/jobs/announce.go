package jobs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// announcements are the Events one step means. Its handler says them as it
// goes (after the write each states, or about a notice that needs none);
// apply emits them when the step has ended, and only when none of its
// writes failed: an Event states what was written, and a step whose write
// was refused, or failed, says nothing of it. The one Event of a failed step
// is the refusal's own, which refused (refusals.go) records itself.
type announcements struct {
	said []announcement
}

// announcement is one Event said about an object.
type announcement struct {
	about                runtime.Object
	eventtype            string
	reason, action, note string
}

// say adds an Event about the object, emitted with the step's others.
func (n *announcements) say(about runtime.Object, eventtype, reason, action, format string, args ...any) {
	n.said = append(n.said, announcement{about: about, eventtype: eventtype, reason: reason, action: action, note: fmt.Sprintf(format, args...)})
}

// emit records what the step said, unless it failed; either way nothing is
// left to say.
func (n *announcements) emit(recorder events.EventRecorder, failed bool) {
	if !failed {
		for _, e := range n.said {
			recorder.Eventf(e.about, nil, e.eventtype, e.reason, e.action, "%s", e.note)
		}
	}
	n.said = nil
}
