package jobcontroller

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobferry/jobferry/internal/jobindex"
)

// matchSuccessPolicy says whether an Indexed Job's succeeded indexes meet
// one of its successPolicy rules, with the upstream message naming the first
// rule that does: all of succeededIndexes (or succeededCount of them), or
// succeededCount indexes of any.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded jobindex.Intervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		switch {
		case rule.SucceededIndexes != nil:
			required := jobindex.Parse(*rule.SucceededIndexes, completions)
			if len(required) == 0 {
				continue
			}
			overlap := overlapCount(required, succeeded)
			met = overlap == required.Total() || (rule.SucceededCount != nil && overlap >= int(*rule.SucceededCount))
		case rule.SucceededCount != nil:
			met = succeeded.Total() >= int(*rule.SucceededCount)
		}
		if met {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlapCount is how many indexes two interval lists share.
func overlapCount(a, b jobindex.Intervals) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if o := min(a[i].Last, b[j].Last) - max(a[i].First, b[j].First) + 1; o > 0 {
			n += o
		}
		switch {
		case b[j].Last < a[i].Last:
			j++
		case b[j].Last > a[i].Last:
			i++
		default:
			i++
			j++
		}
	}
	return n
}
