package devenv

import (
	"strings"
	"testing"
)

func TestWithoutKindDropsOnlyThatKind(t *testing.T) {
	manifest := `---
# Source: a.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: keep-me
---
# Source: b.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: drop-me
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: keep-me-too
`
	got, err := withoutKind([]byte(manifest), "Deployment")
	if err != nil {
		t.Fatal(err)
	}
	out := string(got)
	if strings.Contains(out, "drop-me") || !strings.Contains(out, "name: keep-me\n") || !strings.Contains(out, "keep-me-too") {
		t.Fatalf("withoutKind kept the wrong objects:\n%s", out)
	}
	if _, err := withoutKind([]byte("kind: [unclosed"), "Deployment"); err == nil {
		t.Fatal("a manifest that is not YAML was accepted")
	}
}
