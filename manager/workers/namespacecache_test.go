package workers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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
