package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func condition(t string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue}
}

func TestViewOf(t *testing.T) {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "job-train-1", ResourceVersion: "42"},
		Spec:       kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main"}}},
		Status: kueue.WorkloadStatus{
			Conditions: []metav1.Condition{condition(kueue.WorkloadQuotaReserved)},
			AdmissionChecks: []kueue.AdmissionCheckState{
				{Name: "provisioning", State: kueue.CheckStateReady},
				{Name: "dispatch", State: kueue.CheckStatePending, Message: "waiting"},
			},
		},
	}
	got := ViewOf("team", wl, map[string]bool{"dispatch": true})
	want := View{Queue: "team", Workload: "job-train-1", Version: "42", PodSets: []kueue.PodSetReference{"main"}, QuotaReserved: true,
		Check: "dispatch", State: kueue.CheckStatePending, Message: "waiting", ChecksListed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ViewOf (-want +got):\n%s", diff)
	}
	if v := ViewOf("team", wl, map[string]bool{}); v.Check != "" || v.State != "" || !v.ChecksListed {
		t.Errorf("a Workload with none of jobferry's checks: %+v", v)
	}
	unlisted := wl.DeepCopy()
	unlisted.Status.AdmissionChecks = nil
	if v := ViewOf("team", unlisted, map[string]bool{"dispatch": true}); v.Check != "" || v.ChecksListed {
		t.Errorf("a Workload Kueue has not listed checks on yet: %+v", v)
	}
	off := wl.DeepCopy()
	off.Spec.Active = ptr.To(false)
	off.Status.Conditions = append(off.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue,
		Reason: "DeactivatedDueToAdmissionCheck", Message: "The workload is deactivated due to Admission check(s): dispatch, were rejected"})
	if v := ViewOf("team", off, map[string]bool{"dispatch": true}); !v.Deactivated || !v.Evicted || !strings.Contains(v.Why, "were rejected") {
		t.Errorf("a deactivated Workload: %+v", v)
	}
	if v := ViewOf("team", nil, nil); v.Workload != "" || v.Queue != "team" {
		t.Errorf("no Workload yet: %+v", v)
	}
}

func TestWorkloadPrefersTheUnfinished(t *testing.T) {
	finished := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{condition(kueue.WorkloadFinished)}}}
	current := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "current"}}
	deleting := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "deleting", DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	for name, tc := range map[string]struct {
		owned []kueue.Workload
		want  string
	}{
		"none":                          {},
		"the only one, finished":        {owned: []kueue.Workload{finished}, want: "old"},
		"the unfinished one":            {owned: []kueue.Workload{finished, current}, want: "current"},
		"the unfinished one, first":     {owned: []kueue.Workload{current, finished}, want: "current"},
		"not one being deleted":         {owned: []kueue.Workload{deleting}},
		"not one being deleted, either": {owned: []kueue.Workload{deleting, finished}, want: "old"},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if wl := Current(tc.owned); wl != nil {
				got = wl.Name
			}
			if got != tc.want {
				t.Errorf("Workload = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlacementUpdates(t *testing.T) {
	toleration := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}
	d := v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"pool": "general"}, Tolerations: []corev1.Toleration{toleration}}
	got := PlacementUpdates([]kueue.PodSetReference{"main"}, "worker-1", d)
	want := []kueue.PodSetUpdate{{Name: "main", Annotations: map[string]string{v1alpha1.WorkerAnnotation: "worker-1"},
		NodeSelector: map[string]string{"pool": "general"}, Tolerations: []corev1.Toleration{toleration}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PlacementUpdates (-want +got):\n%s", diff)
	}
	// More tolerations than an update may carry go into the mirror only.
	many := v1alpha1.SchedulingDirectives{Tolerations: make([]corev1.Toleration, maxTolerations+1)}
	if u := PlacementUpdates(nil, "worker-1", many); len(u) != 1 || u[0].Name != kueue.DefaultPodSetName || u[0].Tolerations != nil {
		t.Errorf("updates with %d tolerations: %+v", maxTolerations+1, u)
	}
	ready := CheckUpdate{State: kueue.CheckStateReady, Message: "placed", Updates: got}
	if !ready.Unchanged(View{State: kueue.CheckStateReady, Message: "placed on worker-1: its reasons", Updates: got}) {
		t.Error("a check already Ready with the same updates is written again for its message")
	}
	if ready.Unchanged(View{State: kueue.CheckStatePending}) {
		t.Error("a Pending check is taken for Ready")
	}
}

func TestChanged(t *testing.T) {
	base := kueue.Workload{
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main"}}},
		Status: kueue.WorkloadStatus{
			Conditions:      []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: "insufficient quota, 1 more needed"}},
			AdmissionChecks: []kueue.AdmissionCheckState{{Name: "dispatch", State: kueue.CheckStatePending}},
		},
	}
	for name, tc := range map[string]struct {
		mutate func(*kueue.Workload)
		want   bool
	}{
		"nothing":                 {mutate: func(*kueue.Workload) {}},
		"why it does not fit yet": {mutate: func(w *kueue.Workload) { w.Status.Conditions[0].Message = "insufficient quota, 2 more needed" }},
		"quota reserved":          {mutate: func(w *kueue.Workload) { w.Status.Conditions[0].Status = metav1.ConditionTrue }, want: true},
		"admitted": {mutate: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, condition(kueue.WorkloadAdmitted))
		}, want: true},
		"evicted": {mutate: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, condition(kueue.WorkloadEvicted))
		}, want: true},
		"a check's state":   {mutate: func(w *kueue.Workload) { w.Status.AdmissionChecks[0].State = kueue.CheckStateReady }, want: true},
		"a check's message": {mutate: func(w *kueue.Workload) { w.Status.AdmissionChecks[0].Message = "Reset to Pending after eviction" }, want: true},
		"a check added": {mutate: func(w *kueue.Workload) {
			w.Status.AdmissionChecks = append(w.Status.AdmissionChecks, kueue.AdmissionCheckState{Name: "other"})
		}, want: true},
		"the pod sets":                       {mutate: func(w *kueue.Workload) { w.Spec.PodSets[0].Name = "workers" }, want: true},
		"deactivated":                        {mutate: func(w *kueue.Workload) { w.Spec.Active = ptr.To(false) }, want: true},
		"a condition jobferry does not read": {mutate: func(w *kueue.Workload) { w.Status.Conditions = append(w.Status.Conditions, condition("PodsReady")) }},
	} {
		t.Run(name, func(t *testing.T) {
			after := base.DeepCopy()
			tc.mutate(after)
			if got := Changed(&base, after); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
		})
	}
}
