package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/cachebudget"
)

func TestOptIn(t *testing.T) {
	type result struct {
		Changed          bool
		ManagedBy        string
		Suspend          bool
		HeldForPlacement string
	}
	cases := map[string]struct {
		managedBy *string
		suspend   *bool
		want      result
	}{
		"a plain Job is taken and held for placement": {want: result{Changed: true, ManagedBy: v1alpha1.ManagerManagedBy, Suspend: true, HeldForPlacement: "true"}},
		"a Job created suspended stays the user's":    {suspend: ptr.To(true), want: result{Changed: true, ManagedBy: v1alpha1.ManagerManagedBy, Suspend: true}},
		"an explicit opt-in is held too":              {managedBy: ptr.To(v1alpha1.ManagerManagedBy), want: result{Changed: true, ManagedBy: v1alpha1.ManagerManagedBy, Suspend: true, HeldForPlacement: "true"}},
		"the built-in controller is respected":        {managedBy: ptr.To("kubernetes.io/job-controller"), want: result{ManagedBy: "kubernetes.io/job-controller"}},
		"another controller is respected":             {managedBy: ptr.To("kueue.x-k8s.io/multikueue"), suspend: ptr.To(false), want: result{ManagedBy: "kueue.x-k8s.io/multikueue"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &batchv1.Job{Spec: batchv1.JobSpec{ManagedBy: tc.managedBy, Suspend: tc.suspend}}
			before := in.DeepCopy()
			out, changed := OptIn(in)
			got := result{Changed: changed, ManagedBy: ptr.Deref(out.Spec.ManagedBy, ""), Suspend: ptr.Deref(out.Spec.Suspend, false),
				HeldForPlacement: out.Annotations[v1alpha1.HeldForPlacementAnnotation]}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("input modified:\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		managedBy   string
		annotations map[string]string
		wantErr     string
	}{
		"manager":                {managedBy: v1alpha1.ManagerManagedBy},
		"worker, on the manager": {managedBy: v1alpha1.WorkerManagedBy, wantErr: "is for the mirrors on worker clusters"},
		"someone else's":         {managedBy: "example.com/mine"},
		"a typo in our domain":   {managedBy: "jobferry.dev/managr", wantErr: `use "jobferry.dev/manager"`},
		"a valid selector":       {annotations: map[string]string{v1alpha1.ClusterSelectorAnnotation: "region in (eu,us)"}},
		"a malformed selector":   {annotations: map[string]string{v1alpha1.ClusterSelectorAnnotation: "region in eu"}, wantErr: "is not a label selector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if tc.managedBy != "" {
				job.Spec.ManagedBy = ptr.To(tc.managedBy)
			}
			err := Validate(job)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// The opt-in webhook's registration selects the namespaces the policy
// dispatches from, reserved ones excepted even when labelled.
func TestWebhookConfigurationsSelectNamespaces(t *testing.T) {
	dispatch, err := metav1.ParseToLabelSelector(DefaultDispatchNamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	mutating, validating := WebhookConfigurations("https://127.0.0.1:9443", []byte("ca"), dispatch, []string{"kube-system", "jobferry-system"}, "jobferry-manager")
	selector, err := metav1.LabelSelectorAsSelector(mutating.Webhooks[0].NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"team-a": true, "kube-system": false, "jobferry-system": false} {
		set := labels.Set{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled, corev1.LabelMetadataName: name}
		if got := selector.Matches(set); got != want {
			t.Errorf("opted-in namespace %s selected by the opt-in webhook: %t, want %t", name, got, want)
		}
	}
	if selector.Matches(labels.Set{corev1.LabelMetadataName: "team-b"}) {
		t.Error("a namespace not opted in is selected by the opt-in webhook")
	}
	if validating.Webhooks[0].NamespaceSelector != nil {
		t.Error("the validating webhook must see every namespace: a Job may set spec.managedBy anywhere")
	}
}

// A namespace created moments before its Job, not in the cache yet, is read
// from the API server rather than taken for missing (a Job in it would be
// refused as not opted in).
func TestNamespaceReaderFallsBackToTheAPI(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-new", Labels: map[string]string{v1alpha1.DispatchNamespaceLabel: v1alpha1.DispatchEnabled}}}
	cache := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).Build()
	// An API server selects on metadata.name for every resource; the fake
	// needs it as an index.
	api := fake.NewClientBuilder().WithScheme(v1alpha1.NewScheme()).WithObjects(ns).
		WithIndex(&corev1.Namespace{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
	ctx := context.Background()
	got, err := NamespaceReader{Cache: cache, API: api}.Get(ctx, "team-new")
	if err != nil || got == nil || got.Labels[v1alpha1.DispatchNamespaceLabel] != v1alpha1.DispatchEnabled {
		t.Errorf("got %v, %v; want the namespace the API server has", got, err)
	}
	if got, err := (NamespaceReader{Cache: cache, API: api}).Get(ctx, "team-none"); got != nil || err != nil {
		t.Errorf("a namespace that does not exist: got %v, %v", got, err)
	}
}

// The patch the opt-in webhook answers with, applied to the Job as its
// author sent it, gives what OptIn decides: for every shape of the three
// fields it sets, annotations absent, empty or present.
func TestOptInPatchGivesOptIn(t *testing.T) {
	held := v1alpha1.HeldForPlacementAnnotation
	cases := map[string]*batchv1.Job{
		"a plain Job":                      {},
		"with other annotations":           {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"team": "a/b~c"}}},
		"with empty annotations":           {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}},
		"created suspended":                {Spec: batchv1.JobSpec{Suspend: ptr.To(true)}},
		"explicitly not suspended":         {Spec: batchv1.JobSpec{Suspend: ptr.To(false)}},
		"an explicit opt-in":               {Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}},
		"already opted in and held":        {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{held: "true"}}, Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Suspend: ptr.To(true)}},
		"held by its author, wrongly":      {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{held: "false"}}},
		"suspended, annotated by the user": {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{held: "yes"}}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			in.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}
			want, changed := OptIn(in)
			if !changed {
				t.Fatalf("OptIn left the Job alone")
			}
			raw, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := json.Marshal(OptInPatch(in, want))
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatch.DecodePatch(ops)
			if err != nil {
				t.Fatalf("decoding %s: %v", ops, err)
			}
			patched, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("applying %s: %v", ops, err)
			}
			got := &batchv1.Job{}
			if err := json.Unmarshal(patched, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("patch %s (-OptIn +patched):\n%s", ops, diff)
			}
		})
	}
}

// The opt-in webhook leaves a kube-* namespace's Jobs alone, labelled for
// dispatch or not (its registration names only the reserved namespaces it
// knows), while it takes a tenant's.
func TestOptInLeavesKubeNamespacesAlone(t *testing.T) {
	h := &optIn{decoder: ctrladmission.NewDecoder(v1alpha1.NewScheme())}
	raw, err := json.Marshal(&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}})
	if err != nil {
		t.Fatal(err)
	}
	for ns, wantPatched := range map[string]bool{"kube-addons": false, "team-a": true} {
		resp := h.Handle(context.Background(), ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: ns, Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed || (len(resp.Patches) > 0) != wantPatched {
			t.Errorf("namespace %s: allowed %v with %d patches, want patched %v", ns, resp.Allowed, len(resp.Patches), wantPatched)
		}
	}
}

// An update that takes a Job jobferry dispatches past what the manager's
// cache keeps of one is refused, naming the field; one of a Job already
// past it, or being deleted, or of a Job not jobferry's, is let be.
func TestUpdatePastTheCacheBudgetIsRefused(t *testing.T) {
	h := &validator{decoder: ctrladmission.NewDecoder(v1alpha1.NewScheme())}
	job := func(labels int, mutate ...func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", Labels: map[string]string{}},
			Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy)}}
		for i := range labels {
			j.Labels[fmt.Sprintf("example.com/l-%04d", i)] = "x"
		}
		for _, m := range mutate {
			m(j)
		}
		return j
	}
	within, over := 10, cachebudget.ManagerJobCached.Entries+1
	deleting := func(j *batchv1.Job) {
		j.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	}
	notOurs := func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/other") }
	running := func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }
	suspended := func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }
	bigStatus := func(j *batchv1.Job) {
		j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: make([]types.UID, cachebudget.JobStatus.Entries+1)}
	}
	cases := map[string]struct {
		old, new *batchv1.Job
		refused  bool
	}{
		"grows past the budget: refused":                  {old: job(within), new: job(over), refused: true},
		"stays within it":                                 {old: job(within), new: job(within + 100)},
		"already past it, grown further: refused":         {old: job(over), new: job(over + 1), refused: true},
		"already past it, suspended (Kueue's preemption)": {old: job(over, running), new: job(over, suspended)},
		"already past it, a label fewer":                  {old: job(over), new: job(over - 1)},
		"its status grown past its budget: refused":       {old: job(within), new: job(within, bigStatus), refused: true},
		"shrinks back within it":                          {old: job(over), new: job(within)},
		"being deleted":                                   {old: job(within), new: job(over, deleting)},
		"not jobferry's":                                  {old: job(within, notOurs), new: job(over, notOurs)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			oldRaw, err := json.Marshal(tc.old)
			if err != nil {
				t.Fatal(err)
			}
			newRaw, err := json.Marshal(tc.new)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Handle(context.Background(), ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "team-a", Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
			if resp.Allowed == tc.refused {
				t.Fatalf("allowed %v (%v), want refused %v", resp.Allowed, resp.Result, tc.refused)
			}
			if tc.refused {
				for _, want := range []string{"budget: this change would make the Job hold more than jobferry keeps of one", "suspend its mirror"} {
					if !strings.Contains(resp.Result.Message, want) {
						t.Errorf("refusal %q does not say %q", resp.Result.Message, want)
					}
				}
			}
		})
	}
}

// The largest Job the webhook admits at creation (no resourceVersion yet)
// is not refused at placement for the resourceVersion it has once stored.
func TestTheDispatchBudgetLeavesTheResourceVersionOut(t *testing.T) {
	job := func(n int, rv string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", ResourceVersion: rv},
			Spec: batchv1.JobSpec{ManagedBy: ptr.To(v1alpha1.ManagerManagedBy), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"example.com/a": strings.Repeat("x", n)}}}}}
	}
	lo, hi := 0, cachebudget.ManagerJob.Bytes
	for lo < hi { // the largest n admitted at creation
		mid := (lo + hi + 1) / 2
		if OverDispatchBudget(job(mid, "")) == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if OverDispatchBudget(job(lo+1, "")) == nil {
		t.Fatalf("no Job of %d bytes is over the budget: the test proves nothing", lo+1)
	}
	if refusal := OverDispatchBudget(job(lo, "12345678")); refusal != nil {
		t.Errorf("the largest Job admitted at creation is refused once stored: %s", refusal.Message)
	}
}
