package mirror

import (
	"time"

	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSpecUpdate(t *testing.T) {
	// The mirror as the worker's API server keeps it: generated labels in
	// its template, a status of its own.
	base := func() *batchv1.Job {
		return &batchv1.Job{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](4), BackoffLimit: ptr.To[int32](6), Suspend: ptr.To(false),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", batchv1.ControllerUidLabel: "worker-uid", batchv1.JobNameLabel: "x"}},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"pool": "general"}},
			},
		}, Status: batchv1.JobStatus{StartTime: at(0), Active: 2}}
	}
	desiredFrom := func(m *batchv1.Job, change func(*batchv1.JobSpec)) *batchv1.Job {
		d := &batchv1.Job{Spec: *m.Spec.DeepCopy()}
		d.Spec.Template.Labels = WithoutGeneratedLabels(d.Spec.Template.Labels)
		change(&d.Spec)
		return d
	}
	suspendedNotRunning := func(m *batchv1.Job) {
		m.Spec.Suspend = ptr.To(true)
		m.Status = batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended", 1)}}
	}
	startedThenSuspended := func(m *batchv1.Job) {
		suspendedNotRunning(m)
		m.Status.StartTime = &metav1.Time{Time: time.Unix(1, 0)}
	}
	cases := map[string]struct {
		mirror      func(*batchv1.Job)
		change      func(*batchv1.JobSpec)
		wantChanged []string
		want        func(*batchv1.JobSpec)
		// olderWorker: the mirror's API server is before v1.36
		// (mirror.StartedTemplatesMutable false).
		olderWorker bool
	}{
		"a started, suspended mirror's template follows on a v1.36 worker": {
			mirror:      startedThenSuspended,
			change:      func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "b"} },
			wantChanged: []string{"template"},
			want:        func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "b"} },
		},
		"... not on an older worker, whose API server would refuse it": {
			mirror:      startedThenSuspended,
			change:      func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "b"} },
			olderWorker: true,
		},
		"... where a mirror that never started may still change": {
			mirror:      suspendedNotRunning,
			change:      func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "b"} },
			wantChanged: []string{"template"},
			want:        func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "b"} },
			olderWorker: true,
		},
		"nothing changed: nothing to write": {
			change: func(*batchv1.JobSpec) {},
		},
		"parallelism (kubectl scale)": {
			change:      func(s *batchv1.JobSpec) { s.Parallelism = ptr.To[int32](5) },
			wantChanged: []string{"parallelism"},
			want:        func(s *batchv1.JobSpec) { s.Parallelism = ptr.To[int32](5) },
		},
		"completions and parallelism of an elastic Indexed Job, in one write": {
			change:      func(s *batchv1.JobSpec) { s.Parallelism, s.Completions = ptr.To[int32](3), ptr.To[int32](3) },
			wantChanged: []string{"parallelism", "completions"},
			want:        func(s *batchv1.JobSpec) { s.Parallelism, s.Completions = ptr.To[int32](3), ptr.To[int32](3) },
		},
		"activeDeadlineSeconds set, backoffLimit and maxFailedIndexes changed": {
			change: func(s *batchv1.JobSpec) {
				s.ActiveDeadlineSeconds, s.BackoffLimit, s.MaxFailedIndexes = ptr.To[int64](30), ptr.To[int32](1), ptr.To[int32](2)
			},
			wantChanged: []string{"backoffLimit", "maxFailedIndexes", "activeDeadlineSeconds"},
			want: func(s *batchv1.JobSpec) {
				s.ActiveDeadlineSeconds, s.BackoffLimit, s.MaxFailedIndexes = ptr.To[int64](30), ptr.To[int32](1), ptr.To[int32](2)
			},
		},
		"activeDeadlineSeconds removed": {
			mirror:      func(m *batchv1.Job) { m.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
			change:      func(s *batchv1.JobSpec) { s.ActiveDeadlineSeconds = nil },
			wantChanged: []string{"activeDeadlineSeconds"},
			want:        func(s *batchv1.JobSpec) { s.ActiveDeadlineSeconds = nil },
		},
		"suspend": {
			change:      func(s *batchv1.JobSpec) { s.Suspend = ptr.To(true) },
			wantChanged: []string{"suspend"},
			want:        func(s *batchv1.JobSpec) { s.Suspend = ptr.To(true) },
		},
		"a running mirror's template is immutable: a directive change waits": {
			change: func(s *batchv1.JobSpec) { s.Template.Spec.NodeSelector = map[string]string{"pool": "big"} },
		},
		"a suspended mirror's scheduling directives follow, its generated labels stay": {
			mirror: suspendedNotRunning,
			change: func(s *batchv1.JobSpec) {
				s.Template.Spec.NodeSelector = map[string]string{"pool": "big"}
				s.Template.Labels["team"] = "a"
				s.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
				s.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
				}}}
			},
			wantChanged: []string{"template"},
			want: func(s *batchv1.JobSpec) {
				s.Suspend = ptr.To(true)
				s.Template.Spec.NodeSelector = map[string]string{"pool": "big"}
				s.Template.Labels["team"] = "a"
				s.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
				s.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
				}}}
			},
		},
		"node affinity removed: an affinity left empty goes": {
			mirror: func(m *batchv1.Job) {
				suspendedNotRunning(m)
				m.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
			},
			change:      func(s *batchv1.JobSpec) { s.Template.Spec.Affinity = nil },
			wantChanged: []string{"template"},
			want:        func(s *batchv1.JobSpec) { s.Template.Spec.Affinity = nil },
		},
		"node affinity removed: the pod affinity stays": {
			mirror: func(m *batchv1.Job) {
				suspendedNotRunning(m)
				m.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}, PodAffinity: &corev1.PodAffinity{}}
			},
			change:      func(s *batchv1.JobSpec) { s.Template.Spec.Affinity = nil },
			wantChanged: []string{"template"},
			want: func(s *batchv1.JobSpec) {
				s.Template.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}
			},
		},
		"the generated labels alone are no difference": {
			mirror: suspendedNotRunning,
			change: func(*batchv1.JobSpec) {},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := base()
			if tc.mirror != nil {
				tc.mirror(m)
			}
			desired := desiredFrom(m, tc.change)
			given := m.DeepCopy()
			updated, changed := SpecUpdate(desired, m, !tc.olderWorker)
			if diff := cmp.Diff(given, m); diff != "" {
				t.Errorf("SpecUpdate changed the mirror it was given, which it shares with the cache (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantChanged, changed); diff != "" {
				t.Errorf("changed fields (-want +got):\n%s", diff)
			}
			want := base()
			if tc.mirror != nil {
				tc.mirror(want)
			}
			if tc.want != nil {
				tc.want(&want.Spec)
			}
			if diff := cmp.Diff(want.Spec, updated.Spec); diff != "" {
				t.Errorf("updated mirror spec (-want +got):\n%s", diff)
			}
		})
	}
}
