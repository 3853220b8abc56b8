package jobcontroller

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// policyMatch is what a Job's podFailurePolicy says of one failed pod.
type policyMatch struct {
	// action of the first matching rule; "" when none matched.
	action batchv1.PodFailurePolicyAction
	// countFailed: the pod counts towards status.failed, backoffLimit and
	// its index's failure count (every action but Ignore, and no match).
	countFailed bool
	// failJobMessage is set for a FailJob match: the message of the Job's
	// FailureTarget and Failed conditions.
	failJobMessage string
}

// matchPodFailurePolicy applies the rules in order, as upstream: a rule
// matches on a non-zero exit code of a terminated container (init
// containers after the others) or on a pod condition with the given status.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) policyMatch {
	if policy == nil {
		return policyMatch{countFailed: true}
	}
	for i, rule := range policy.Rules {
		var failJobMessage string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchOnExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJobMessage = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			c := matchOnPodConditions(&pod.Status, rule.OnPodConditions)
			if c == nil {
				continue
			}
			failJobMessage = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
				pod.Namespace, pod.Name, c.Type, rule.Action, i)
		default:
			continue
		}
		switch rule.Action {
		case batchv1.PodFailurePolicyActionIgnore:
			return policyMatch{action: rule.Action}
		case batchv1.PodFailurePolicyActionCount:
			return policyMatch{action: rule.Action, countFailed: true}
		case batchv1.PodFailurePolicyActionFailJob:
			return policyMatch{action: rule.Action, countFailed: true, failJobMessage: failJobMessage}
		case batchv1.PodFailurePolicyActionFailIndex:
			// Validation allows it only with backoffLimitPerIndex.
			return policyMatch{action: rule.Action, countFailed: true}
		}
	}
	return policyMatch{countFailed: true}
}

func matchOnExitCodes(status *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	if cs := matchingContainer(status.ContainerStatuses, req); cs != nil {
		return cs
	}
	return matchingContainer(status.InitContainerStatuses, req)
}

func matchingContainer(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for i := range statuses {
		cs := &statuses[i]
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode == 0 {
			continue
		}
		if req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		in := slices.Contains(req.Values, cs.State.Terminated.ExitCode)
		if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
			return cs
		}
	}
	return nil
}

func matchOnPodConditions(status *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c
			}
		}
	}
	return nil
}

// failJobMessage is the message of the first failed pod matching a FailJob
// rule, or "".
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) string {
	if job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); m.failJobMessage != "" {
				return m.failJobMessage
			}
		}
	}
	return ""
}

// countedFailures is how many of the failed pods count (not Ignored).
func countedFailures(job *batchv1.Job, failed []*corev1.Pod) int32 {
	var n int32
	for _, p := range failed {
		if matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).countFailed {
			n++
		}
	}
	return n
}
