package jobcontroller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMatchPodFailurePolicy(t *testing.T) {
	exitIn := func(action batchv1.PodFailurePolicyAction, container *string, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: container, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes}}
	}
	exitNotIn := func(action batchv1.PodFailurePolicyAction, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: codes}}
	}
	onDisruption := func(action batchv1.PodFailurePolicyAction) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}
	}
	failedPod := func(exit int32, conditions ...corev1.PodConditionType) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}}}
		for _, c := range conditions {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return p
	}
	cases := map[string]struct {
		rules []batchv1.PodFailurePolicyRule
		pod   *corev1.Pod
		want  policyMatch
	}{
		"no policy counts": {pod: failedPod(1), want: policyMatch{countFailed: true}},
		"FailJob on an exit code, with the upstream message": {
			rules: []batchv1.PodFailurePolicyRule{exitIn(batchv1.PodFailurePolicyActionFailJob, nil, 42)}, pod: failedPod(42),
			want: policyMatch{action: batchv1.PodFailurePolicyActionFailJob, countFailed: true,
				failJobMessage: "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0"},
		},
		"exit code 0 never matches": {
			rules: []batchv1.PodFailurePolicyRule{exitNotIn(batchv1.PodFailurePolicyActionFailJob, 1)}, pod: failedPod(0),
			want: policyMatch{countFailed: true},
		},
		"NotIn matches other codes": {
			rules: []batchv1.PodFailurePolicyRule{exitNotIn(batchv1.PodFailurePolicyActionCount, 1)}, pod: failedPod(3),
			want: policyMatch{action: batchv1.PodFailurePolicyActionCount, countFailed: true},
		},
		"another container's name does not match": {
			rules: []batchv1.PodFailurePolicyRule{exitIn(batchv1.PodFailurePolicyActionFailJob, ptr.To("sidecar"), 42)}, pod: failedPod(42),
			want: policyMatch{countFailed: true},
		},
		"Ignore on a disruption is not counted": {
			rules: []batchv1.PodFailurePolicyRule{onDisruption(batchv1.PodFailurePolicyActionIgnore)}, pod: failedPod(137, corev1.DisruptionTarget),
			want: policyMatch{action: batchv1.PodFailurePolicyActionIgnore},
		},
		"the first matching rule wins": {
			rules: []batchv1.PodFailurePolicyRule{
				exitIn(batchv1.PodFailurePolicyActionFailJob, nil, 7),
				onDisruption(batchv1.PodFailurePolicyActionIgnore),
				exitIn(batchv1.PodFailurePolicyActionFailJob, nil, 137),
			},
			pod:  failedPod(137, corev1.DisruptionTarget),
			want: policyMatch{action: batchv1.PodFailurePolicyActionIgnore},
		},
		"FailJob on a pod condition": {
			rules: []batchv1.PodFailurePolicyRule{onDisruption(batchv1.PodFailurePolicyActionFailJob)}, pod: failedPod(1, corev1.DisruptionTarget),
			want: policyMatch{action: batchv1.PodFailurePolicyActionFailJob, countFailed: true,
				failJobMessage: "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var policy *batchv1.PodFailurePolicy
			if tc.rules != nil {
				policy = &batchv1.PodFailurePolicy{Rules: tc.rules}
			}
			got := matchPodFailurePolicy(policy, tc.pod)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(policyMatch{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
