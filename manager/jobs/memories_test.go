package jobs

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

func TestNamespaceCacheExpires(t *testing.T) {
	var c namespaceCache
	t0 := time.Unix(100, 0)
	ns := &corev1.Namespace{}
	c.put("team-a", ns, t0)
	if got, ok := c.get("team-a", t0.Add(9*time.Second), 10*time.Second); !ok || got != ns {
		t.Errorf("within the TTL: %v, %t", got, ok)
	}
	if _, ok := c.get("team-a", t0.Add(10*time.Second), 10*time.Second); ok {
		t.Error("read back after the TTL")
	}
	c.put("gone", nil, t0)
	if got, ok := c.get("gone", t0, time.Second); !ok || got != nil {
		t.Errorf("a namespace known missing: %v, %t; want nil, true", got, ok)
	}
	c.forget("team-a")
	if _, ok := c.get("team-a", t0, time.Minute); ok {
		t.Error("read back after forget")
	}
}
