package jobcontroller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/jobferry/jobferry/internal/jobindex"
)

func TestMatchSuccessPolicy(t *testing.T) {
	indexes := func(s string) *batchv1.SuccessPolicyRule {
		return &batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To(s)}
	}
	cases := map[string]struct {
		rules     []batchv1.SuccessPolicyRule
		succeeded string
		wantMsg   string
	}{
		"nothing succeeded":          {rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}, succeeded: ""},
		"count reached":              {rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](2)}}, succeeded: "1,4", wantMsg: "Matched rules at index 0"},
		"count not reached":          {rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](3)}}, succeeded: "1,4"},
		"all required indexes":       {rules: []batchv1.SuccessPolicyRule{*indexes("0-2")}, succeeded: "0-3", wantMsg: "Matched rules at index 0"},
		"a required index missing":   {rules: []batchv1.SuccessPolicyRule{*indexes("0-2")}, succeeded: "0,2,3"},
		"count within the indexes":   {rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-4"), SucceededCount: ptr.To[int32](2)}}, succeeded: "3,4,7", wantMsg: "Matched rules at index 0"},
		"the first matching rule":    {rules: []batchv1.SuccessPolicyRule{*indexes("5"), {SucceededCount: ptr.To[int32](1)}}, succeeded: "2", wantMsg: "Matched rules at index 1"},
		"indexes beyond completions": {rules: []batchv1.SuccessPolicyRule{*indexes("9")}, succeeded: "1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg, met := matchSuccessPolicy(&batchv1.SuccessPolicy{Rules: tc.rules}, 8, jobindex.Parse(tc.succeeded, 8))
			if msg != tc.wantMsg || met != (tc.wantMsg != "") {
				t.Errorf("got (%q, %t), want %q", msg, met, tc.wantMsg)
			}
		})
	}
}
