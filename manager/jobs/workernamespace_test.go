package jobs

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/jobs/policy/policytest"
	"github.com/jobferry/jobferry/manager/workers"
)

const (
	psaEnforce = "pod-security.kubernetes.io/enforce"
	psaWarn    = "pod-security.kubernetes.io/warn"
)

// namespace is a namespace with labels kv (key, value, ...).
func namespace(name string, kv ...string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		ns.Labels[kv[i]] = kv[i+1]
	}
	return ns
}

func TestPodSecurityLabels(t *testing.T) {
	if got := podSecurityLabels(namespace("a", psaEnforce, "restricted", "pod-security.kubernetes.io/warn-version", "v1.30", "team", "x")); len(got) != 2 || got["team"] != "" {
		t.Errorf("podSecurityLabels = %v, want the two Pod Security labels only", got)
	}
}

func TestPlanWorkerNamespace(t *testing.T) {
	all := workers.NamespaceRights{Create: true, Relabel: true}
	restricted := map[string]string{psaEnforce: "restricted"}
	cases := map[string]struct {
		have   *corev1.Namespace
		want   map[string]string
		may    workers.NamespaceRights
		listed bool
		action namespaceAction
		ours   bool
		// labels of the namespace as the plan leaves it
		labels map[string]string
	}{
		"missing: created with the manager's labels and this installation's ID": {
			want: restricted, may: all, action: namespaceCreate, ours: true,
			labels: map[string]string{psaEnforce: "restricted", v1alpha1.ManagerIDLabel: "m1"},
		},
		"missing, the manager's namespace without Pod Security labels": {
			may: workers.NamespaceRights{Create: true}, action: namespaceCreate, ours: true,
			labels: map[string]string{v1alpha1.ManagerIDLabel: "m1"},
		},
		"missing and jobferry may not create it": {
			want: restricted, action: namespaceMissing,
		},
		"ours, in step": {
			have: namespace("team-a", psaEnforce, "restricted", v1alpha1.ManagerIDLabel, "m1"), want: restricted, may: all,
			action: namespaceAsIs, ours: true, labels: map[string]string{psaEnforce: "restricted", v1alpha1.ManagerIDLabel: "m1"},
		},
		"ours, the manager's tightened since: relabelled, other labels kept": {
			have: namespace("team-a", psaEnforce, "baseline", psaWarn, "restricted", "team", "a", v1alpha1.ManagerIDLabel, "m1"),
			want: restricted, may: all, action: namespaceRelabel, ours: true,
			labels: map[string]string{psaEnforce: "restricted", "team": "a", v1alpha1.ManagerIDLabel: "m1"},
		},
		"ours, the manager's loosened to none: the labels go": {
			have: namespace("team-a", psaEnforce, "restricted", v1alpha1.ManagerIDLabel, "m1"), may: all,
			action: namespaceRelabel, ours: true, labels: map[string]string{v1alpha1.ManagerIDLabel: "m1"},
		},
		"ours, but the credential may not patch namespaces": {
			have: namespace("team-a", psaEnforce, "baseline", v1alpha1.ManagerIDLabel, "m1"), want: restricted, may: workers.NamespaceRights{Create: true},
			action: namespaceAsIs, ours: true, labels: map[string]string{psaEnforce: "baseline", v1alpha1.ManagerIDLabel: "m1"},
		},
		"another installation's: not accepted, never changed": {
			have: namespace("team-a", psaEnforce, "baseline", v1alpha1.ManagerIDLabel, "m2"), want: restricted, may: all,
			action: namespaceNotAccepted, labels: map[string]string{psaEnforce: "baseline", v1alpha1.ManagerIDLabel: "m2"},
		},
		"made by someone else: not accepted, never changed": {
			have: namespace("team-a", psaEnforce, "baseline"), want: restricted, may: all,
			action: namespaceNotAccepted, labels: map[string]string{psaEnforce: "baseline"},
		},
		"made by someone else, accepting another installation's Jobs": {
			have: namespace("team-a", v1alpha1.AcceptsManagerLabel("m2"), "true"), may: all,
			action: namespaceNotAccepted, labels: map[string]string{v1alpha1.AcceptsManagerLabel("m2"): "true"},
		},
		"made by someone else, listed for the manager (spec.namespaces): used, never changed": {
			have: namespace("team-a", psaEnforce, "baseline"), want: restricted, may: all, listed: true,
			action: namespaceAsIs, labels: map[string]string{psaEnforce: "baseline"},
		},
		"made by someone else, this installation's acceptance label not true": {
			have: namespace("team-a", v1alpha1.AcceptsManagerLabel("m1"), "false"), may: all,
			action: namespaceNotAccepted, labels: map[string]string{v1alpha1.AcceptsManagerLabel("m1"): "false"},
		},
		"made by someone else, accepting this installation's Jobs: used, never changed": {
			have: namespace("team-a", psaEnforce, "baseline", v1alpha1.AcceptsManagerLabel("m1"), "true"), want: restricted, may: all,
			action: namespaceAsIs, labels: map[string]string{psaEnforce: "baseline", v1alpha1.AcceptsManagerLabel("m1"): "true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var before *corev1.Namespace
			if tc.have != nil {
				before = tc.have.DeepCopy()
			}
			plan := planWorkerNamespace("team-a", tc.have, tc.want, "m1", tc.may, tc.listed)
			if plan.action != tc.action || plan.ours != tc.ours {
				t.Errorf("action %d, ours %t; want %d, %t", plan.action, plan.ours, tc.action, tc.ours)
			}
			if tc.action == namespaceMissing {
				if plan.namespace != nil {
					t.Errorf("a missing namespace planned as %v", plan.namespace)
				}
				return
			}
			if plan.namespace == nil || plan.namespace.Name != "team-a" {
				t.Fatalf("planned namespace %v, want team-a", plan.namespace)
			}
			if diff := cmp.Diff(tc.labels, plan.namespace.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.have); diff != "" {
				t.Errorf("the namespace as read was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// After Pod Security is tightened on the manager, the namespace jobferry
// created on a worker follows before the next mirror goes there; one it did
// not create, or may not patch, keeps its labels and the worker is refused
// with the reason.
func TestJobReconcilerKeepsItsWorkerNamespacesInStepWithPodSecurity(t *testing.T) {
	cases := map[string]struct {
		workerNS  *corev1.Namespace
		noRelabel bool
		// wantLevel is the worker namespace's enforce label afterwards;
		// wantWhy, when set, is in the Job's waiting message (no mirror).
		wantLevel string
		wantWhy   []string
	}{
		"jobferry created it": {
			workerNS: namespace("team-a", psaEnforce, "privileged", v1alpha1.ManagerIDLabel, "m1"), wantLevel: "baseline",
		},
		"jobferry created it, the credential may not patch namespaces": {
			workerNS: namespace("team-a", psaEnforce, "privileged", v1alpha1.ManagerIDLabel, "m1"), noRelabel: true, wantLevel: "privileged",
			wantWhy: []string{`weaker than "baseline:latest"`, "jobferry created it, but its credential there may not patch namespaces", "managerIdentity.allowNamespaceCreation"},
		},
		"an administrator made it and accepted this manager's Jobs": {
			workerNS: namespace("team-a", psaEnforce, "privileged", v1alpha1.AcceptsManagerLabel("m1"), "true"), wantLevel: "privileged",
			wantWhy: []string{`its namespace team-a enforces PodSecurity "privileged:latest", weaker than "baseline:latest"`},
		},
		"an administrator made it and did not accept this manager's Jobs": {
			workerNS: namespace("team-a", psaEnforce, "privileged"), wantLevel: "privileged",
			wantWhy: []string{"namespace team-a there was not created by jobferry and its administrator has not accepted this manager's Jobs in it",
				"kubectl label namespace team-a accepts-manager.jobferry.dev/m1=true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h := newJobsHarness(t, "w1")
			h.r.Config.ManagerID = "m1"
			w := h.workers.Conns["w1"]
			w.NoRelabel = tc.noRelabel
			if err := w.API.Create(ctx, tc.workerNS); err != nil {
				t.Fatal(err)
			}
			managerNS := &corev1.Namespace{}
			if err := h.manager.Get(ctx, types.NamespacedName{Name: "team-a"}, managerNS); err != nil {
				t.Fatal(err)
			}
			managerNS.Labels[psaEnforce] = "baseline"
			if err := h.manager.Update(ctx, managerNS); err != nil {
				t.Fatal(err)
			}
			h.create(t, policytest.Job())
			h.reconcile(t)

			got := &corev1.Namespace{}
			if err := w.API.Get(ctx, types.NamespacedName{Name: "team-a"}, got); err != nil {
				t.Fatal(err)
			}
			if got.Labels[psaEnforce] != tc.wantLevel {
				t.Errorf("the worker's namespace enforces %q, want %q", got.Labels[psaEnforce], tc.wantLevel)
			}
			m := h.mirror(t, "w1")
			if tc.wantWhy == nil {
				if m == nil {
					t.Fatalf("no mirror on w1; the Job says %v", h.job(t).Status.Conditions)
				}
				return
			}
			if m != nil {
				t.Fatalf("a mirror was created in a namespace weaker than the manager's")
			}
			message := ""
			for _, c := range h.job(t).Status.Conditions {
				message += c.Message
			}
			for _, want := range tc.wantWhy {
				if !strings.Contains(message, want) {
					t.Errorf("the Job's conditions say %q, want %q in them", message, want)
				}
			}
		})
	}
}
