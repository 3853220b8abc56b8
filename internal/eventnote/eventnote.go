// Package eventnote keeps Events' notes within what the API server takes:
// an Event with a longer note is refused, and lost.
package eventnote

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxBytes is the most an Event's note may hold (events.k8s.io/v1): the
// API server refuses a longer one, and the Event is lost.
const MaxBytes = 1024

// boundedRecorder records Events with their notes cut to MaxBytes: a
// placement summary over many workers, a Pod Security refusal naming many
// checks or a rejected status's fields can run longer, and the Event must
// still reach the Job.
type boundedRecorder struct{ events.EventRecorder }

// Bound wraps a recorder so every note fits (once).
func Bound(r events.EventRecorder) events.EventRecorder {
	if _, ok := r.(boundedRecorder); ok || r == nil {
		return r
	}
	return boundedRecorder{r}
}

func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Cut(fmt.Sprintf(note, args...)))
}

// Cut is s cut to MaxBytes, as valid UTF-8, ending in "..." when cut.
func Cut(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxBytes-3], "") + "..."
}
