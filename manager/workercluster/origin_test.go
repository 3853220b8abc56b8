package workercluster

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
)

func TestOriginCondition(t *testing.T) {
	if c := originCondition("jobferry", nil); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonOriginExclusive {
		t.Errorf("no conflict: %+v", c)
	}
	c := originCondition("jobferry", &workers.OriginConflict{Manager: "b", Job: types.NamespacedName{Namespace: "team-a", Name: "train"}})
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonOriginShared ||
		!strings.Contains(c.Message, `jobferry.dev/manager-id b) with the same origin "jobferry" made mirrors on this worker, such as team-a/train`) {
		t.Errorf("a conflict: %+v", c)
	}
}
