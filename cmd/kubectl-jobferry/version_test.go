package main

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobferry/jobferry/internal/buildinfo"
)

func TestVersionText(t *testing.T) {
	pod := func(name, version string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example/jobferry-manager:" + version}}}}
		if version != "" {
			p.Labels["app.kubernetes.io/version"] = version
		}
		return p
	}
	client := buildinfo.Info{Version: "v0.1.0", Revision: "abc", GoVersion: "go1.26.8"}
	for _, tc := range []struct {
		name string
		r    versionReport
		want string
	}{
		{"client only", versionReport{Client: client}, "Client Version: v0.1.0 (revision abc, go1.26.8)\n"},
		{"an upgrade half done", versionReport{Client: client, Manager: podVersions([]corev1.Pod{pod("m-b", "0.2.0"), pod("m-a", "0.1.0")})},
			"Client Version: v0.1.0 (revision abc, go1.26.8)\nManager Version: 0.1.0, 0.2.0\n  m-a: 0.1.0 (registry.example/jobferry-manager:0.1.0)\n  m-b: 0.2.0 (registry.example/jobferry-manager:0.2.0)\n"},
		{"unlabelled pod", versionReport{Client: client, Manager: podVersions([]corev1.Pod{pod("m-a", "")})},
			"Client Version: v0.1.0 (revision abc, go1.26.8)\nManager Version: unknown\n  m-a: unknown (registry.example/jobferry-manager:)\n"},
		{"manager unreadable", versionReport{Client: client, ManagerError: "forbidden"}, "Client Version: v0.1.0 (revision abc, go1.26.8)\nManager Version: unknown: forbidden\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printVersion(&out, tc.r, ""); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("printed\n%q\nwant\n%q", out.String(), tc.want)
			}
		})
	}
}
