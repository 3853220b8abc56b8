package workercluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/workers"
)

// Each branch of the WorkerCluster controller's decision.
func TestDecideWorker(t *testing.T) {
	const interval = 10 * time.Second
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason}
	}
	connected := cond(v1alpha1.ConditionConnected, metav1.ConditionTrue, v1alpha1.ReasonConnected)
	unreachable := cond(v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	authorized := cond(v1alpha1.ConditionAuthorized, metav1.ConditionTrue, v1alpha1.ReasonAuthorized)
	missingRights := cond(v1alpha1.ConditionAuthorized, metav1.ConditionFalse, v1alpha1.ReasonMissingRights)
	exclusive := cond(v1alpha1.ConditionOriginExclusive, metav1.ConditionTrue, v1alpha1.ReasonOriginExclusive)
	expiring := cond(v1alpha1.ConditionCredentialRenewal, metav1.ConditionTrue, "Renewing")
	summary := &v1alpha1.ClusterCapacityStatus{Pools: []v1alpha1.NodePool{{Name: "general", Free: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}
	healthy := workerFacts{connected: connected, hasConnection: true, authorized: &authorized, origin: &exclusive, capacity: summary}
	with := func(f workerFacts, change func(*workerFacts)) workerFacts {
		change(&f)
		return f
	}
	// wc is a WorkerCluster whose last written status has these
	// conditions (and this capacity), and the Ready they make.
	wc := func(capacity *v1alpha1.ClusterCapacityStatus, conds ...metav1.Condition) *v1alpha1.WorkerCluster {
		w := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1", Generation: 3}}
		if len(conds) > 0 {
			conds = append(conds, readyCondition(conds))
		}
		for _, c := range conds {
			c.ObservedGeneration = 3
			meta.SetStatusCondition(&w.Status.Conditions, c)
		}
		w.Status.Capacity = capacity
		return w
	}
	cases := map[string]struct {
		wc    *v1alpha1.WorkerCluster
		facts workerFacts
		// want
		requeue                   time.Duration
		write, connectedNow, lost bool
		check                     func(t *testing.T, s v1alpha1.WorkerClusterStatus)
	}{
		"a worker connecting for the first time": {
			wc: wc(nil), facts: healthy, requeue: interval, write: true, connectedNow: true,
			check: func(t *testing.T, s v1alpha1.WorkerClusterStatus) {
				if !meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady) {
					t.Errorf("not Ready: %+v", meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady))
				}
				for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionAuthorized, v1alpha1.ConditionOriginExclusive, v1alpha1.ConditionReady} {
					if c := meta.FindStatusCondition(s.Conditions, typ); c == nil || c.ObservedGeneration != 3 {
						t.Errorf("condition %s: %+v, want it set for generation 3", typ, c)
					}
				}
				if !equality.Semantic.DeepEqual(s.Capacity, summary) {
					t.Errorf("capacity %v, want the summary", s.Capacity)
				}
			},
		},
		"nothing changed: no write": {
			wc: wc(summary, connected, authorized, exclusive), facts: healthy, requeue: interval,
		},
		"the Job counts changed: a write": {
			wc: wc(summary, connected, authorized, exclusive), facts: with(healthy, func(f *workerFacts) { f.dispatched, f.running = 2, 1 }),
			requeue: interval, write: true,
			check: func(t *testing.T, s v1alpha1.WorkerClusterStatus) {
				if s.DispatchedJobs != 2 || s.RunningJobs != 1 {
					t.Errorf("counts %d dispatched, %d running; want 2, 1", s.DispatchedJobs, s.RunningJobs)
				}
			},
		},
		"lost: probes failing back off, and its Jobs start counting": {
			wc: wc(summary, connected, authorized, exclusive),
			facts: with(healthy, func(f *workerFacts) {
				f.connected, f.probeFailures, f.authorized, f.capacity = unreachable, 3, nil, nil
			}),
			requeue: 4 * time.Second, write: true, lost: true,
			check: func(t *testing.T, s v1alpha1.WorkerClusterStatus) {
				if !equality.Semantic.DeepEqual(s.Capacity, summary) {
					t.Errorf("capacity %v: the last summary is kept while none is known", s.Capacity)
				}
				if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionAuthorized); c == nil || c.Status != metav1.ConditionTrue {
					t.Errorf("Authorized %+v: kept as last reviewed while the worker does not answer", c)
				}
				if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnreachable {
					t.Errorf("Ready %+v, want False, Unreachable", c)
				}
			},
		},
		"no connection at all (the Secret is missing): the health interval": {
			wc:      wc(nil, unreachable),
			facts:   workerFacts{connected: cond(v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)},
			requeue: interval, write: true,
		},
		"rights missing: looked at again soon": {
			wc: wc(summary, connected, authorized, exclusive), facts: with(healthy, func(f *workerFacts) { f.authorized = &missingRights }),
			requeue: rightsRetry, write: true,
		},
		"a renewal due before the next probe": {
			wc: wc(summary, connected, authorized, exclusive),
			facts: with(healthy, func(f *workerFacts) {
				f.credentialCondition, f.credentialAfter = &expiring, 2*time.Second
			}),
			requeue: 2 * time.Second, write: true,
		},
		"a token that no longer expires loses the renewal condition": {
			wc: wc(summary, connected, authorized, exclusive, expiring), facts: healthy, requeue: interval, write: true,
			check: func(t *testing.T, s v1alpha1.WorkerClusterStatus) {
				if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionCredentialRenewal); c != nil {
					t.Errorf("CredentialRenewal %+v, want it removed", c)
				}
			},
		},
		"without a connection the credential condition stays as it was": {
			wc:      wc(nil, unreachable, expiring),
			facts:   workerFacts{connected: unreachable},
			requeue: interval,
		},
		"the worker's version read: a write showing it": {
			wc: wc(summary, connected, authorized, exclusive),
			facts: with(healthy, func(f *workerFacts) {
				f.version = &workers.KubernetesVersion{GitVersion: "v1.32.13", Parsed: version.MustParseGeneric("v1.32.13")}
			}),
			requeue: interval, write: true,
			check: func(t *testing.T, s v1alpha1.WorkerClusterStatus) {
				if s.KubernetesVersion != "v1.32.13" {
					t.Errorf("kubernetesVersion %q, want v1.32.13", s.KubernetesVersion)
				}
			},
		},
		"a connection that has read no version yet leaves the one shown": {
			wc: func() *v1alpha1.WorkerCluster {
				w := wc(summary, connected, authorized, exclusive)
				w.Status.KubernetesVersion = "v1.32.13"
				return w
			}(),
			facts: with(healthy, func(f *workerFacts) { f.versionErr = "/version: not a version" }), requeue: interval,
		},
		"connected again": {
			wc: wc(summary, unreachable, authorized, exclusive), facts: healthy, requeue: interval, write: true, connectedNow: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.wc.DeepCopy()
			d := decideWorker(tc.wc, tc.facts, interval)
			if d.requeue != tc.requeue || d.write != tc.write || d.connectedNow != tc.connectedNow || d.lost != tc.lost {
				t.Errorf("requeue %s, write %t, connectedNow %t, lost %t; want %s, %t, %t, %t",
					d.requeue, d.write, d.connectedNow, d.lost, tc.requeue, tc.write, tc.connectedNow, tc.lost)
			}
			if d.connected != (tc.facts.connected.Status == metav1.ConditionTrue) {
				t.Errorf("connected %t for condition %s", d.connected, tc.facts.connected.Status)
			}
			if tc.check != nil {
				tc.check(t, d.status)
			}
			if !equality.Semantic.DeepEqual(before, tc.wc) {
				t.Error("the WorkerCluster read was changed")
			}
		})
	}
}
