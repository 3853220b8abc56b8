// Package eventtime says when an Event last happened, whichever of its
// fields carries it (a series' last observation, the legacy lastTimestamp,
// the events/v1 eventTime, its creation), and orders Events by it: the
// plugin and the inspection API show Events oldest first.
package eventtime

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Last is when the Event last happened.
func Last(e corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// Sort orders events oldest first (stable: Events of the same moment keep
// their order).
func Sort(events []corev1.Event) {
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return Last(a).Compare(Last(b)) })
}
