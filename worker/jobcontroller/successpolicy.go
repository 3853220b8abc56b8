package jobcontroller

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
)

// matchSuccessPolicy says whether an Indexed Job's succeeded indexes meet
// one of its successPolicy rules, with the upstream message naming the first
// rule that does: all of succeededIndexes (or succeededCount of them), or
// succeededCount indexes of any.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded intervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		switch {
		case rule.SucceededIndexes != nil:
			required := parseIntervals(*rule.SucceededIndexes, completions)
			if len(required) == 0 {
				continue
			}
			overlap := overlapCount(required, succeeded)
			met = overlap == required.total() || (rule.SucceededCount != nil && overlap >= int(*rule.SucceededCount))
		case rule.SucceededCount != nil:
			met = succeeded.total() >= int(*rule.SucceededCount)
		}
		if met {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlapCount is how many indexes two interval lists share.
func overlapCount(a, b intervals) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if o := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; o > 0 {
			n += o
		}
		switch {
		case b[j].last < a[i].last:
			j++
		case b[j].last > a[i].last:
			i++
		default:
			i++
			j++
		}
	}
	return n
}
