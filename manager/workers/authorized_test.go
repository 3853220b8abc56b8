package workers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The Authorized condition for each outcome of a rights review.
func TestAuthorizedCondition(t *testing.T) {
	cases := map[string]struct {
		state   rightsState
		status  metav1.ConditionStatus
		says    []string
		saysNot []string
	}{
		"a required right missing": {
			state:  rightsState{missing: []Right{{Verb: "create", Resource: "jobs", Group: "batch"}}, mayWatchWarnings: true, mayReadPods: true},
			status: metav1.ConditionFalse, says: []string{"its credential may not create jobs.batch", "no Job is placed here until it may"},
		},
		"every right, namespaces created and kept in step": {
			state:  rightsState{namespaces: NamespaceRights{Create: true, Relabel: true, Collect: true}, mayWatchWarnings: true, mayReadPods: true},
			status: metav1.ConditionTrue, says: []string{"may create namespaces for mirrors and keep their Pod Security labels in step"},
			saysNot: []string{"stay there"},
		},
		"namespaces created, not collected": {
			state:  rightsState{namespaces: NamespaceRights{Create: true, Relabel: true}, mayWatchWarnings: true, mayReadPods: true},
			status: metav1.ConditionTrue, says: []string{"without all of list namespaces, delete namespaces, list serviceaccounts", "stay there once the manager's are gone", "managerIdentity.allowNamespaceDeletion", "stay there once the manager's are gone"},
		},
		"namespaces created, not relabelled": {
			state:  rightsState{namespaces: NamespaceRights{Create: true}, mayWatchWarnings: true, mayReadPods: true},
			status: metav1.ConditionTrue, says: []string{"it may not patch namespaces", "takes no more Jobs"},
		},
		"no namespaces created": {
			state:  rightsState{mayWatchWarnings: true, mayReadPods: true},
			status: metav1.ConditionTrue, says: []string{"it creates no namespace there, so Jobs go only to namespaces that exist"},
		},
		"Events, not pods": {
			state:  rightsState{mayWatchWarnings: true},
			status: metav1.ConditionTrue, says: []string{"it may not get pods", "only the mirrors' own"},
		},
		"no Events": {
			state:  rightsState{},
			status: metav1.ConditionTrue, says: []string{"it may not list and watch Events"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := authorizedCondition(&tc.state)
			if c.Type != v1alpha1.ConditionAuthorized || c.Status != tc.status {
				t.Errorf("%s=%s, want %s", c.Type, c.Status, tc.status)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			for _, s := range tc.saysNot {
				if strings.Contains(c.Message, s) {
					t.Errorf("message %q says %q", c.Message, s)
				}
			}
		})
	}
}
