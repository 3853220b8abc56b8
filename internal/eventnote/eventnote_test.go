package eventnote

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
)

func TestBoundedRecorderCutsNotes(t *testing.T) {
	fake := events.NewFakeRecorder(1)
	r := Bound(fake)
	if Bound(r) != r {
		t.Error("a bounded recorder was wrapped twice")
	}
	r.Eventf(&batchv1.Job{}, nil, "Warning", "Unschedulable", "Place", "no worker fits; %s", strings.Repeat("w-é: no room, ", 200))
	got := <-fake.Events
	note := strings.TrimPrefix(got, "Warning "+"Unschedulable"+" ")
	if len(note) > MaxBytes || !strings.HasPrefix(note, "no worker fits; w-é") || !strings.HasSuffix(note, "...") {
		t.Errorf("note of %d bytes: %q…", len(note), note[:40])
	}
	if strings.ToValidUTF8(note, "?") != note {
		t.Error("the cut note is not valid UTF-8")
	}
}
