package main

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describe shows what kubectl describe pod shows of a failed container:
// its state and reason, exit code, restarts and last state; a container
// that runs, or ended well, is left out.
func TestPrintContainers(t *testing.T) {
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "train-a"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "train", RestartCount: 2,
				State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "loss is NaN"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}},
			{Name: "sidecar", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "train-b"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "train", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
		}},
	}
	var out bytes.Buffer
	printContainers(&out, pods)
	got := out.String()
	for _, want := range []string{
		"Containers that failed, wait or restarted:",
		"train-a   train       Terminated (Error)         1           2          Terminated (OOMKilled), exit code 137   loss is NaN",
		"train-b   fetch       Waiting (ImagePullBackOff)   <none>      0          <none>",
	} {
		if !strings.Contains(strings.Join(strings.Fields(got), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("printed\n%s\nwithout %q", got, want)
		}
	}
	for _, notWanted := range []string{"sidecar", "Completed"} {
		if strings.Contains(got, notWanted) {
			t.Errorf("printed\n%s\nwith %q, a container that runs or ended well", got, notWanted)
		}
	}
	out.Reset()
	printContainers(&out, pods[1:1])
	if out.Len() != 0 {
		t.Errorf("printed %q for pods whose containers are all fine", out.String())
	}
}
