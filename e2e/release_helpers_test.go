//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// testWriter writes into the test's log, a line at a time.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// checkPulledFrom waits for the kubelet's Pulled Event of the pod's image:
// pulled from the registry, or already present on the node (a replica on
// the same node as one that pulled it). It reports whether this pod pulled.
func checkPulledFrom(ctx context.Context, t *testing.T, c kubernetes.Interface, pod corev1.Pod, image string) (pulled bool) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != "Pulled" || !strings.Contains(e.Message, `"`+image+`"`) {
				continue
			}
			pulled = strings.HasPrefix(e.Message, "Successfully pulled image")
			return pulled || strings.Contains(e.Message, "already present on machine"), nil
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("pod %s: no Pulled Event of %s within 30s: %v; its Events:\n%s", pod.Name, image, err, strings.Join(seen, "\n"))
	}
	return pulled
}
