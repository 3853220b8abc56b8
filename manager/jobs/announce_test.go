package jobs

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

// What a step said goes out when it ended well; when a write failed, only
// what it made final (wrote) before that write.
func TestAnnouncementsEmit(t *testing.T) {
	job := &batchv1.Job{}
	for _, tc := range []struct {
		name   string
		say    func(n *announcements)
		failed bool
		want   string
	}{
		{"step ended well", func(n *announcements) {
			n.say(job, corev1.EventTypeNormal, "A", "a", "first")
			n.wrote(job, corev1.EventTypeNormal, "B", "b", "second")
			n.say(job, corev1.EventTypeNormal, "C", "c", "third")
		}, false, "A,B,C"},
		{"a write failed", func(n *announcements) {
			n.say(job, corev1.EventTypeNormal, "A", "a", "first")
		}, true, ""},
		{"a write failed after one made final", func(n *announcements) {
			n.say(job, corev1.EventTypeNormal, "A", "a", "first")
			n.wrote(job, corev1.EventTypeWarning, "B", "b", "second")
			n.say(job, corev1.EventTypeNormal, "C", "c", "third")
		}, true, "A,B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			var n announcements
			tc.say(&n)
			n.emit(recorder, tc.failed)
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, strings.Fields(<-recorder.Events)[1])
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("emitted %v, want %s", got, tc.want)
			}
			if len(n.said) != 0 || n.final != 0 {
				t.Errorf("left to say: %d (final %d)", len(n.said), n.final)
			}
		})
	}
}
