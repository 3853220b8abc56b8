package manager

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// maxNoteBytes is the most an Event's note may hold (events.k8s.io/v1): the
// API server refuses a longer one, and the Event is lost.
const maxNoteBytes = 1024

// boundedRecorder records Events with their notes cut to maxNoteBytes: a
// placement summary over many workers, a Pod Security refusal naming many
// checks or a rejected status's fields can run longer, and the Event must
// still reach the Job.
type boundedRecorder struct{ events.EventRecorder }

// boundNotes wraps a recorder so every note fits (once).
func boundNotes(r events.EventRecorder) events.EventRecorder {
	if _, ok := r.(boundedRecorder); ok || r == nil {
		return r
	}
	return boundedRecorder{r}
}

func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", cutNote(fmt.Sprintf(note, args...)))
}

// cutNote is s cut to maxNoteBytes, as valid UTF-8, ending in "..." when cut.
func cutNote(s string) string {
	if len(s) <= maxNoteBytes {
		return s
	}
	return strings.ToValidUTF8(s[:maxNoteBytes-3], "") + "..."
}
