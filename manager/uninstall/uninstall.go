// Package uninstall is the manager chart's uninstall check (`manager
// uninstall-check`, a pre-delete hook): `helm uninstall` goes on only once
// nothing would be stranded by the manager's going — no worker registered
// (each removed with `kubectl jobferry remove`, which waits until nothing
// of this manager runs there), no namespace still opted in (a Job created
// there between the check and the webhooks' deletion would be taken over
// and never run), no unfinished Job jobferry manages (its spec.managedBy is
// immutable: nothing else would ever run it).
package uninstall

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/managedjobs"
)

// The check's rights (its own ServiceAccount's, hack/generate.sh writes
// them into the chart): it only lists.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list
// +kubebuilder:rbac:groups=jobferry.dev,resources=workerclusters,verbs=list
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list

// Release names the helm release being uninstalled, for the way back.
type Release struct {
	Name, Namespace string
	Revision        int
}

// Findings are what would be stranded.
type Findings struct {
	Workers    []string
	Namespaces []string
	Jobs       []managedjobs.Job
}

// Clear reports whether nothing would be stranded.
func (f Findings) Clear() bool {
	return len(f.Workers) == 0 && len(f.Namespaces) == 0 && len(f.Jobs) == 0
}

// shown bounds the names a refusal lists of each kind.
const shown = 20

// Check reads what the uninstall would strand. dispatch is the manager's
// dispatch namespace selector.
func Check(ctx context.Context, kube kubernetes.Interface, c client.Client, dispatch labels.Selector) (Findings, error) {
	var f Findings
	var workers v1alpha1.WorkerClusterList
	if err := c.List(ctx, &workers); err != nil {
		return f, fmt.Errorf("listing WorkerClusters: %w", err)
	}
	for _, w := range workers.Items {
		f.Workers = append(f.Workers, w.Name)
	}
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: dispatch.String()})
	if err != nil {
		return f, fmt.Errorf("listing the namespaces opted in (%s): %w", dispatch, err)
	}
	for _, ns := range namespaces.Items {
		f.Namespaces = append(f.Namespaces, ns.Name)
	}
	if f.Jobs, _, err = managedjobs.List(ctx, kube, ""); err != nil {
		return f, err
	}
	return f, nil
}

// Refusal says why the uninstall is refused and what to do; label is the
// opt-in label to take off (the selector's).
func Refusal(f Findings, r Release, dispatch labels.Selector) string {
	var b strings.Builder
	b.WriteString("uninstall refused: once jobferry's manager is gone nothing would run or watch what it still manages:\n")
	if len(f.Workers) > 0 {
		fmt.Fprintf(&b, "- %d workers are registered; remove each first, which waits until nothing of this manager runs there: kubectl jobferry remove WORKER\n%s", len(f.Workers), managedjobs.Indented(f.Workers, shown))
	}
	if len(f.Namespaces) > 0 {
		fmt.Fprintf(&b, "- %d namespaces are opted in (%s): a Job created there during the uninstall would be taken over and never run; take them out first\n%s", len(f.Namespaces), dispatch, managedjobs.Indented(f.Namespaces, shown))
	}
	if len(f.Jobs) > 0 {
		fmt.Fprintf(&b, "- %d Jobs jobferry manages are unfinished (their spec.managedBy is immutable: nothing else will run them); wait for them or delete them\n%s", len(f.Jobs), managedjobs.Lines(f.Jobs, shown))
	}
	fmt.Fprintf(&b, "Then uninstall again. helm has left the release %q as uninstalling: `helm rollback %s %d -n %s` makes it deployed again (helm upgrade refuses it until then).\n",
		r.Name, r.Name, r.Revision, r.Namespace)
	b.WriteString("To uninstall anyway, leaving all of it as it is: helm uninstall --no-hooks, or set uninstallCheck.enabled=false.\n")
	return b.String()
}
