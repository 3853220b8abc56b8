package inspection

import (
	"net/url"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobstate"
)

var testKey = jobstate.Key{Secret: []byte("0123456789abcdef0123456789abcdef"), Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}

// placedJob is a manager Job placed on worker-1 with mirror m-uid, its
// state sealed under testKey.
func placedJob() *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "job-uid",
			CreationTimestamp: metav1.NewTime(testKey.Since.Add(time.Hour)),
			Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-1", v1alpha1.DispatchAttemptAnnotation: "2",
				v1alpha1.MirrorUIDAnnotation: "m-uid"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)},
	}
	return jobstate.Sealed(job, testKey)
}

func TestPlacementComesOnlyFromSealedState(t *testing.T) {
	forged := placedJob()
	forged.Annotations[v1alpha1.WorkerAnnotation] = "worker-2"
	unmanaged := placedJob()
	unmanaged.Spec.ManagedBy = nil
	unplaced := jobstate.Sealed(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "u", CreationTimestamp: metav1.NewTime(testKey.Since.Add(time.Hour))},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}}, testKey)
	for name, tc := range map[string]struct {
		job        *batchv1.Job
		wantWorker string
		wantNote   string
	}{
		"placed":                       {placedJob(), "worker-1", ""},
		"a placement someone else set": {forged, "", "was not written by jobferry"},
		"not jobferry's":               {unmanaged, "", "not dispatched by jobferry"},
		"not placed":                   {unplaced, "", "on no worker"},
	} {
		t.Run(name, func(t *testing.T) {
			p, note := placementOf(tc.job, testKey)
			if p.worker != tc.wantWorker || !strings.Contains(note, tc.wantNote) || (tc.wantNote == "") != (note == "") {
				t.Errorf("placementOf = %+v, %q; want worker %q, a note saying %q", p, note, tc.wantWorker, tc.wantNote)
			}
		})
	}
	if p, _ := placementOf(placedJob(), testKey); p.attempt != "2" || p.mirrorUID != "m-uid" {
		t.Errorf("placement %+v: want attempt 2, mirror m-uid", p)
	}
}

func TestOnlyTheCurrentMirrorIsShown(t *testing.T) {
	job := placedJob()
	p, _ := placementOf(job, testKey)
	mirror := func(uid, origin, originUID string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: types.UID(uid),
			Labels: map[string]string{v1alpha1.OriginLabel: origin, v1alpha1.OriginUIDLabel: originUID}}}
	}
	for name, tc := range map[string]struct {
		found *batchv1.Job
		want  string
	}{
		"the mirror": {mirror("m-uid", "jobferry", "job-uid"), ""},
		"a same-named Job of someone on the worker":  {mirror("m-uid", "", ""), "not this Job's mirror"},
		"a Job forging our labels under another UID": {mirror("other", "jobferry", "job-uid"), "not this Job's current mirror"},
		"another installation's mirror":              {mirror("m-uid", "other", "job-uid"), "not this Job's mirror"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := notMirror(job, p, tc.found, "jobferry"); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("notMirror = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLogTargets(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, containers ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		return p
	}
	pods := []corev1.Pod{pod("old", corev1.PodFailed, "main"), pod("running", corev1.PodRunning, "main", "sidecar"), pod("new", corev1.PodPending, "main")}
	for _, tc := range []struct {
		pods    []corev1.Pod
		q       logQuery
		want    string
		wantErr string
	}{
		{pods, logQuery{}, "running/main,running/sidecar", ""},
		{pods, logQuery{container: "sidecar"}, "running/sidecar", ""},
		{pods, logQuery{container: "main", allPods: true}, "old/main,running/main,new/main", ""},
		{pods, logQuery{pod: "old"}, "old/main", ""},
		{[]corev1.Pod{pods[0], pods[2]}, logQuery{}, "new/main", ""},
		{pods, logQuery{container: "missing", allPods: true}, "", `no pod chosen of the mirror has a container "missing"`},
		{pods, logQuery{pod: "someone-elses-pod"}, "", `pod "someone-elses-pod" is not a pod of the Job's mirror`},
		{nil, logQuery{}, "", "the mirror has no pods"},
	} {
		targets, err := logTargets(tc.pods, tc.q)
		var got []string
		for _, t := range targets {
			got = append(got, t.pod+"/"+t.container)
		}
		if strings.Join(got, ",") != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("logTargets(%+v) = %v, %v; want %s, %q", tc.q, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseLogQuery(t *testing.T) {
	q, err := parseLogQuery(url.Values{"follow": {"true"}, "container": {"main"}, "limitBytes": {"99999999"}}, 1000)
	if err != nil || !q.follow || q.container != "main" || q.limitBytes != 1000 {
		t.Errorf("parseLogQuery = %+v, %v; want follow, main, the manager's cap of 1000 bytes", q, err)
	}
	if q, err := parseLogQuery(url.Values{"limitBytes": {"10"}}, 1000); err != nil || q.limitBytes != 10 {
		t.Errorf("limitBytes=10: %+v, %v", q, err)
	}
	for _, bad := range []url.Values{{"follow": {"yes please"}}, {"limitBytes": {"-1"}}, {"pod": {"p"}, "allPods": {"true"}}} {
		if _, err := parseLogQuery(bad, 1000); err == nil {
			t.Errorf("parseLogQuery(%v) accepted", bad)
		}
	}
}

func TestNewestEvents(t *testing.T) {
	at := func(reason string, minute int) corev1.Event {
		return corev1.Event{Reason: reason, LastTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))}
	}
	events, cut := newestEvents([]corev1.Event{at("c", 3), at("a", 1), at("b", 2)}, 2)
	if !cut || len(events) != 2 || events[0].Reason != "b" || events[1].Reason != "c" {
		t.Errorf("newestEvents = %v, cut %t; want b, c and cut", events, cut)
	}
}
