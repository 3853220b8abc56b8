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
// is the refusal's own, which refused (refusals.go) records itself — and
// an Event a step made final with wrote: its write went through, and a
// later write of the step that fails cannot take it back.
type announcements struct {
	said []announcement
	// final: said[:final] go out whatever the rest of the step does.
	final int
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

// wrote says an Event about a write that went through and that the step's
// later writes do not undo (jobferry's check on a Workload set Rejected,
// say, before the Job shows why): it goes out even if one of them fails,
// as the retry would not say it again.
func (n *announcements) wrote(about runtime.Object, eventtype, reason, action, format string, args ...any) {
	n.say(about, eventtype, reason, action, format, args...)
	n.final = len(n.said)
}

// emit records what the step said — when it failed, only what it made
// final; either way nothing is left to say.
func (n *announcements) emit(recorder events.EventRecorder, failed bool) {
	out := n.said
	if failed {
		out = n.said[:n.final]
	}
	for _, e := range out {
		recorder.Eventf(e.about, nil, e.eventtype, e.reason, e.action, "%s", e.note)
	}
	n.said, n.final = nil, 0
}
