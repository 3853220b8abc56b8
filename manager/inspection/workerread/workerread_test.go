package workerread

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/heapretained"
)

// A list is read an item at a time, whatever the order of its keys; a
// null or empty list has none; what is not a list is an error.
func TestEachItem(t *testing.T) {
	for _, tc := range []struct {
		body      string
		names     []string
		continue_ string
		wantErr   bool
	}{
		{body: `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"c1"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`,
			names: []string{"a", "b"}, continue_: "c1"},
		{body: `{"items":[{"metadata":{"name":"a"}}],"metadata":{"continue":"c2"},"extra":{"x":[1,2]}}`, names: []string{"a"}, continue_: "c2"},
		{body: `{"kind":"PodList","items":null,"metadata":{}}`},
		{body: `{"items":[]}`},
		{body: `[{"metadata":{"name":"a"}}]`, wantErr: true},
		{body: `{"items":{"a":1}}`, wantErr: true},
		{body: `{"items":[{"metadata":{"name":"a"}}`, wantErr: true},
	} {
		var names []string
		meta, err := EachItem(strings.NewReader(tc.body), func(dec *json.Decoder) error {
			var p corev1.Pod
			if err := dec.Decode(&p); err != nil {
				return err
			}
			names = append(names, p.Name)
			return nil
		})
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want one: %t", tc.body, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (strings.Join(names, ",") != strings.Join(tc.names, ",") || meta.Continue != tc.continue_) {
			t.Errorf("%s: items %q, continue %q; want %q, %q", tc.body, names, meta.Continue, tc.names, tc.continue_)
		}
	}
}

func encodedSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// Whatever a worker's users write into a pod, an Event or a Job, what an
// inspection shows of it stays within its bound: objects filled at random
// with long strings and long lists, and the largest each bound allows.
func TestShownObjectsAreBounded(t *testing.T) {
	for seed := range int64(10) {
		f := heapretained.Filler(seed, MaxContainers+MaxStatuses, 2*MaxMessage)
		var pod corev1.Pod
		f.Fill(&pod)
		if n := encodedSize(t, ShownPod(&pod)); n > MaxShownPodBytes {
			t.Errorf("seed %d: a pod shown takes %d bytes, over %d", seed, n, MaxShownPodBytes)
		}
		var ev corev1.Event
		f.Fill(&ev)
		if n := encodedSize(t, ShownEvent(&ev)); n > MaxShownEventBytes {
			t.Errorf("seed %d: an Event shown takes %d bytes, over %d", seed, n, MaxShownEventBytes)
		}
		var job batchv1.Job
		f.Fill(&job)
		if n := encodedSize(t, ShownJob(&job)); n > MaxShownPodBytes {
			t.Errorf("seed %d: a Job shown takes %d bytes, over %d", seed, n, MaxShownPodBytes)
		}
	}
	// The largest: every list at its bound, every string over it.
	long := strings.Repeat("x", 1<<20)
	state := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: long, Message: long},
		Terminated: &corev1.ContainerStateTerminated{Reason: long, Message: long}}
	pod := corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = long, long, "u"
	pod.Annotations = map[string]string{"a": long}
	for range 2 * MaxContainers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: long, Env: []corev1.EnvVar{{Name: "E", Value: long}}})
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: long})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: long, State: state, LastTerminationState: state})
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: long, State: state, LastTerminationState: state})
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodConditionType(long), Status: "True", Reason: long, Message: long})
	}
	pod.Status.Message, pod.Status.Reason, pod.Spec.NodeName = long, long, long
	shown := ShownPod(&pod)
	n := encodedSize(t, shown)
	if n > MaxShownPodBytes {
		t.Errorf("the largest pod shown takes %d bytes, over %d", n, MaxShownPodBytes)
	}
	if len(shown.Spec.Containers) != MaxContainers || shown.Spec.Containers[0].Env != nil {
		t.Errorf("the largest pod shows %d containers (want %d) with env %v", len(shown.Spec.Containers), MaxContainers, shown.Spec.Containers[0].Env != nil)
	}
	t.Logf("the largest pod shown: %d bytes", n)
	ev := corev1.Event{Message: long, Reason: long, Type: long, Action: long, ReportingController: long,
		InvolvedObject: corev1.ObjectReference{Kind: long, Name: long, Namespace: long, UID: "u", FieldPath: long},
		Source:         corev1.EventSource{Component: long, Host: long}}
	ev.Name, ev.Namespace, ev.UID = long, long, "u"
	if n := encodedSize(t, ShownEvent(&ev)); n > MaxShownEventBytes {
		t.Errorf("the largest Event shown takes %d bytes, over %d", n, MaxShownEventBytes)
	}
}

// What a Reader reads of a worker's lists is bounded in bytes too: past
// its budget it stops, keeping what it found, and says so.
func TestReadsStopAtTheBudget(t *testing.T) {
	mirror := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "m-uid"}}
	var list corev1.PodList
	for i := range 5 {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("train-%d", i), UID: types.UID(fmt.Sprint(i)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "m-uid", Controller: ptr.To(true)}}}}
		p.Status.Message = strings.Repeat("m", 100<<10)
		list.Items = append(list.Items, p)
	}
	body, err := json.Marshal(&list)
	if err != nil {
		t.Fatal(err)
	}
	r := NewWithLister(nil, func(context.Context, string, string, metav1.ListOptions) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(body)), nil
	})
	r.left = 250 << 10
	pods, err := r.Pods(t.Context(), mirror, 200)
	if err != nil || !pods.Stopped || !pods.More || len(pods.Items) != 2 {
		t.Errorf("5 pods of 100 KiB read within 250 KiB: %d pods, stopped %t, more %t, %v; want the 2 read whole, stopped", len(pods.Items), pods.Stopped, pods.More, err)
	}
	events, all, _, err := r.Events(t.Context(), "team", map[types.UID]bool{}, 5000, 500)
	if err != nil || all || len(events) != 0 {
		t.Errorf("Events once the budget is spent: %d, all %t, %v", len(events), all, err)
	}
}
