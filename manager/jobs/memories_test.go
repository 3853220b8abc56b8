package jobs

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestObservedMemoKeepsTheOldestChange(t *testing.T) {
	var m observedMemo
	key := types.NamespacedName{Namespace: "a", Name: "j"}
	t0 := time.Unix(100, 0)
	m.seen(key, t0)
	m.seen(key, t0.Add(time.Second))
	if got := m.since(key); !got.Equal(t0) {
		t.Errorf("since = %v, want the first change %v", got, t0)
	}
	if got, ok := m.take(key); !ok || !got.Equal(t0) {
		t.Errorf("take = %v, %t; want %v", got, ok, t0)
	}
	if _, ok := m.take(key); ok {
		t.Error("a change taken is still remembered")
	}
}
