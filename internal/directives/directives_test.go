package directives

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func requirement(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func required(terms ...[]corev1.NodeSelectorRequirement) *corev1.NodeAffinity {
	ns := &corev1.NodeSelector{}
	for _, t := range terms {
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
	}
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
}

func TestMerge(t *testing.T) {
	toleration := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}
	a, b, c, d := requirement("a", "1"), requirement("b", "1"), requirement("c", "1"), requirement("d", "1")
	preferred := corev1.PreferredSchedulingTerm{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{c}}}
	cases := map[string]struct {
		spec       corev1.PodSpec
		directives v1alpha1.SchedulingDirectives
		want       corev1.PodSpec
		wantErr    string
	}{
		"nothing to merge": {spec: corev1.PodSpec{NodeSelector: map[string]string{"x": "1"}}, want: corev1.PodSpec{NodeSelector: map[string]string{"x": "1"}}},
		"nodeSelector entries are added": {
			spec:       corev1.PodSpec{NodeSelector: map[string]string{"x": "1"}},
			directives: v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"y": "2", "x": "1"}},
			want:       corev1.PodSpec{NodeSelector: map[string]string{"x": "1", "y": "2"}},
		},
		"a conflicting nodeSelector is an error": {
			spec:       corev1.PodSpec{NodeSelector: map[string]string{"x": "1"}},
			directives: v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{"x": "2"}},
			wantErr:    "nodeSelector x=1 conflicts with the worker's x=2",
		},
		"tolerations are added once": {
			spec:       corev1.PodSpec{Tolerations: []corev1.Toleration{toleration}},
			directives: v1alpha1.SchedulingDirectives{Tolerations: []corev1.Toleration{toleration, other}},
			want:       corev1.PodSpec{Tolerations: []corev1.Toleration{toleration, other}},
		},
		"node affinity onto a Job without one": {
			directives: v1alpha1.SchedulingDirectives{NodeAffinity: required([]corev1.NodeSelectorRequirement{a})},
			want:       corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: required([]corev1.NodeSelectorRequirement{a})}},
		},
		"required terms are ANDed: every Job term joins every worker term": {
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: required([]corev1.NodeSelectorRequirement{a}, []corev1.NodeSelectorRequirement{b})}},
			directives: v1alpha1.SchedulingDirectives{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  required([]corev1.NodeSelectorRequirement{c}, []corev1.NodeSelectorRequirement{d}).RequiredDuringSchedulingIgnoredDuringExecution,
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{preferred},
			}},
			want: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: required(
					[]corev1.NodeSelectorRequirement{a, c}, []corev1.NodeSelectorRequirement{a, d},
					[]corev1.NodeSelectorRequirement{b, c}, []corev1.NodeSelectorRequirement{b, d},
				).RequiredDuringSchedulingIgnoredDuringExecution,
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{preferred},
			}}},
		},
		"a Job term that already holds a worker term stays as it is": {
			spec:       corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: required([]corev1.NodeSelectorRequirement{a, c}, []corev1.NodeSelectorRequirement{b})}},
			directives: v1alpha1.SchedulingDirectives{NodeAffinity: required([]corev1.NodeSelectorRequirement{c}, []corev1.NodeSelectorRequirement{d})},
			want: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: required(
				[]corev1.NodeSelectorRequirement{a, c},
				[]corev1.NodeSelectorRequirement{b, c}, []corev1.NodeSelectorRequirement{b, d},
			)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := corev1.PodTemplateSpec{Spec: tc.spec}
			before := in.DeepCopy()
			got, err := Merge(in, tc.directives)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("merged spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &in); diff != "" {
				t.Errorf("input template modified:\n%s", diff)
			}
			// A mirror is rebuilt from a template the directives were merged
			// into already: merging them again changes nothing.
			again, err := Merge(got, tc.directives)
			if err != nil {
				t.Fatalf("merging again: %v", err)
			}
			if diff := cmp.Diff(got.Spec, again.Spec); diff != "" {
				t.Errorf("merging twice differs from merging once (-once +twice):\n%s", diff)
			}
		})
	}
}
