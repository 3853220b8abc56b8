package sharedstrings

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// decodedJob is a Job whose every string is its own copy, as one decoded
// from the API server is.
func decodedJob(name, uid string) *batchv1.Job {
	c := strings.Clone
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c("team-a"), Name: c(name), UID: types.UID(c(uid)),
			Labels:      map[string]string{c("batch.kubernetes.io/job-name"): c(name), c("batch.kubernetes.io/controller-uid"): c(uid), c("team"): c("a")},
			Annotations: map[string]string{c("jobferry.dev/worker"): c("worker-1")},
		},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{c("app"): c("x")}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:      c("work"),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(c("cpu")): resource.MustParse("100m")}},
			}}},
		}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
			Type: batchv1.JobConditionType(c("Complete")), Status: corev1.ConditionTrue, Reason: c("CompletionsReached"), Message: c("Reached expected number of succeeded pods"),
		}}},
	}
}

func data(s string) *byte { return unsafe.StringData(s) }

func onlyKey[K ~string, V any](t *testing.T, m map[K]V, want K) K {
	t.Helper()
	for k := range m {
		if k == want {
			return k
		}
	}
	t.Fatalf("no key %q in %v", want, m)
	return ""
}

func TestJobSharesRepeatedStringsAndChangesNothing(t *testing.T) {
	a, b := decodedJob("a", "11111111-1111-1111-1111-111111111111"), decodedJob("b", "22222222-2222-2222-2222-222222222222")
	before := a.DeepCopy()
	if data(a.Namespace) == data(b.Namespace) {
		t.Fatal("the test's Jobs share their strings before the call")
	}
	Job(a)
	Job(b)
	if !equality.Semantic.DeepEqual(before, a) {
		t.Fatalf("sharing changed the Job:\nbefore %+v\nafter  %+v", before, a)
	}
	shared := map[string][2]string{
		"namespace":          {a.Namespace, b.Namespace},
		"label key":          {onlyKey(t, a.Labels, "team"), onlyKey(t, b.Labels, "team")},
		"annotation key":     {onlyKey(t, a.Annotations, "jobferry.dev/worker"), onlyKey(t, b.Annotations, "jobferry.dev/worker")},
		"template label key": {onlyKey(t, a.Spec.Template.Labels, "app"), onlyKey(t, b.Spec.Template.Labels, "app")},
		"container name":     {a.Spec.Template.Spec.Containers[0].Name, b.Spec.Template.Spec.Containers[0].Name},
		"resource name": {
			string(onlyKey(t, a.Spec.Template.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)),
			string(onlyKey(t, b.Spec.Template.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)),
		},
		"condition reason":  {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
		"condition message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
	}
	for what, pair := range shared {
		if data(pair[0]) != data(pair[1]) {
			t.Errorf("the two Jobs' %s %q are two copies", what, pair[0])
		}
	}
	if data(a.Labels["batch.kubernetes.io/job-name"]) != data(a.Name) {
		t.Error("the job-name label does not share the Job's name")
	}
	if data(a.Labels["batch.kubernetes.io/controller-uid"]) != data(string(a.UID)) {
		t.Error("the controller-uid label does not share the Job's UID")
	}
	if a.Labels["team"] != "a" || data(a.Labels["team"]) == data(b.Labels["team"]) {
		t.Error("an ordinary label value changed or was shared (only keys are)")
	}
}

// Containers asking for the same share one map of requests; a different
// request keeps its own; none changes.
func TestJobsAskingAlikeShareTheirRequests(t *testing.T) {
	a, b := decodedJob("a", "11111111-1111-1111-1111-111111111111"), decodedJob("b", "22222222-2222-2222-2222-222222222222")
	c := decodedJob("c", "33333333-3333-3333-3333-333333333333")
	c.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
	want := c.DeepCopy()
	Job(a)
	Job(b)
	Job(c)
	requests := func(j *batchv1.Job) corev1.ResourceList { return j.Spec.Template.Spec.Containers[0].Resources.Requests }
	if reflect.ValueOf(requests(a)).UnsafePointer() != reflect.ValueOf(requests(b)).UnsafePointer() {
		t.Error("two Jobs requesting 100m CPU hold two maps")
	}
	if reflect.ValueOf(requests(a)).UnsafePointer() == reflect.ValueOf(requests(c)).UnsafePointer() {
		t.Error("a Job requesting 200m CPU shares the map of those requesting 100m")
	}
	if !equality.Semantic.DeepEqual(want, c) || func() string { q := requests(a)[corev1.ResourceCPU]; return q.String() }() != "100m" {
		t.Errorf("sharing changed the requests: %v, %v", requests(a), requests(c))
	}
}

// The table of shared lists is bounded: once full, a new kind of list is
// kept as it is, not added.
func TestResourceListTableIsBounded(t *testing.T) {
	resourceLists.Lock()
	kept := maps.Clone(resourceLists.byKey)
	resourceLists.Unlock()
	t.Cleanup(func() {
		resourceLists.Lock()
		resourceLists.byKey = kept
		resourceLists.Unlock()
	})
	for i := range maxResourceLists + 10 {
		ResourceList(corev1.ResourceList{"example.com/bounded": *resource.NewQuantity(int64(i+1), resource.DecimalSI)})
	}
	resourceLists.Lock()
	n := len(resourceLists.byKey)
	resourceLists.Unlock()
	if n > maxResourceLists {
		t.Errorf("%d shared lists, want at most %d", n, maxResourceLists)
	}
	fresh := corev1.ResourceList{"example.com/bounded": resource.MustParse("999999")}
	if got := ResourceList(fresh); reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(fresh).UnsafePointer() {
		t.Error("a list first seen with the table full was not kept as it is")
	}
}

// Only small lists are shared: a tenant's list of many resources, or of
// long names, is kept as it is and never enters the table, which holds
// what it holds until the manager restarts.
func TestOnlySmallResourceListsAreShared(t *testing.T) {
	many := corev1.ResourceList{}
	for i := range maxSharedResources + 1 {
		many[corev1.ResourceName(fmt.Sprintf("example.com/many-%d", i))] = resource.MustParse("1")
	}
	long := corev1.ResourceList{corev1.ResourceName("example.com/" + strings.Repeat("l", maxSharedKey)): resource.MustParse("1")}
	for name, list := range map[string]corev1.ResourceList{"many": many, "long": long} {
		if got := ResourceList(list); reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(list).UnsafePointer() {
			t.Errorf("%s: not kept as it is", name)
		}
		resourceLists.Lock()
		_, shared := resourceLists.byKey[resourceListKey(list)]
		resourceLists.Unlock()
		if shared {
			t.Errorf("%s: entered the table", name)
		}
	}
}
