package workers

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/randfill"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/internal/heapretained"
	"github.com/jobferry/jobferry/manager/cachebudget"
	"github.com/jobferry/jobferry/mirror"
)

// What each cache keeps of one object someone else wrote, measured on the
// heap (heapretained). The budgets are in entries and encoded bytes; these
// are the bounds in memory they give.
const (
	// maxRetainedMirror: a Job with jobferry's origin label, whatever
	// its size (1,000 of them hold 64 MiB at most).
	maxRetainedMirror = 64 << 10
	// maxRetainedCapacity: a worker's capacity summary.
	maxRetainedCapacity = 2 << 20
	// maxRetainedEvent: a worker's Warning Event as it is forwarded.
	maxRetainedEvent = 4 << 10
)

// retainedPerObject is heapretained.Bytes per object.
func retainedPerObject(n int, make func(i int) any, transform func(any) any) int {
	return heapretained.Bytes(n, make, transform) / n
}

// filler fills what it is given with up to elements entries in each map
// and list and strings of up to strlen bytes, never nil.
func filler(seed int64, elements, strlen int) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0).NumElements(1, elements).MaxDepth(8).Funcs(
		func(s *string, c randfill.Continue) {
			n := c.Intn(strlen + 1)
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('a' + c.Intn(26))
			}
			*s = string(b)
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
	)
}

// maximalJob is a Job with jobferry's origin label whose every field the
// mirror cache ever read is filled by big: its labels (jobferry's identity
// labels among them), its template's metadata and scheduling fields, its
// status. The rest of it, small (the cache never read it).
func maximalJob(seed int64, big *randfill.Filler) *batchv1.Job {
	job := &batchv1.Job{}
	randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 2).MaxDepth(6).Funcs(
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("1") },
	).Fill(job)
	job.Namespace, job.Name, job.UID = "flood", fmt.Sprintf("forged-%d", seed), types.UID(fmt.Sprintf("uid-%d", seed))
	t := &job.Spec.Template
	big.Fill(&job.Labels)
	big.Fill(&t.Labels)
	big.Fill(&t.Annotations)
	big.Fill(&t.Spec.NodeSelector)
	big.Fill(&t.Spec.Tolerations)
	big.Fill(&t.Spec.SchedulingGates)
	t.Spec.Affinity = &corev1.Affinity{}
	big.Fill(t.Spec.Affinity)
	big.Fill(&job.Status)
	var long string
	big.Fill(&long)
	for _, k := range mirror.IdentityLabelKeys {
		job.Labels[k] = long
	}
	job.Labels[v1alpha1.OriginLabel] = "jobferry"
	return job
}

func transformMirror(obj any) any {
	kept, err := mirrorTransform(nil)(obj)
	if err != nil {
		panic(err)
	}
	return kept
}

// However a Job with jobferry's labels is filled, the mirror cache keeps
// at most maxRetainedMirror of it: Jobs filled at random, from small to
// far over the budget, and Jobs made to hold all the budget allows in the
// field whose entries cost most.
func TestMirrorCacheKeepsAtMostItsBudget(t *testing.T) {
	const n = 150
	random := retainedPerObject(n, func(i int) any {
		return maximalJob(int64(i), filler(int64(i), 1+i%40, (i%8)*512))
	}, transformMirror)
	t.Logf("Jobs filled at random: %d bytes kept per Job", random)
	if random > maxRetainedMirror {
		t.Errorf("the mirror cache keeps %d bytes per Job filled at random, over %d", random, maxRetainedMirror)
	}
	// Just within the budget, each field alone: all the entries allowed, or all the bytes.
	full := map[string]func(j *batchv1.Job){
		"conditions": func(j *batchv1.Job) {
			j.Status.Conditions = make([]batchv1.JobCondition, cachebudget.Mirror.Entries-8)
		},
		"tolerations": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Tolerations = make([]corev1.Toleration, cachebudget.Mirror.Entries-8)
		},
		"node selector": func(j *batchv1.Job) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{}
			for i := range cachebudget.Mirror.Entries - 8 {
				j.Spec.Template.Spec.NodeSelector[fmt.Sprint(i)] = ""
			}
		},
		"node affinity values": func(j *batchv1.Job) {
			values := make([]string, cachebudget.Mirror.Entries-8)
			for i := range values {
				values[i] = fmt.Sprint(i)
			}
			j.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Values: values}}}}}}}
		},
		"template annotations": func(j *batchv1.Job) {
			j.Spec.Template.Annotations = map[string]string{"a": strings.Repeat("a", cachebudget.Mirror.Bytes-2048)}
		},
	}
	for name, fill := range full {
		per := retainedPerObject(n, func(i int) any {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "flood", Name: fmt.Sprintf("full-%d", i), UID: types.UID(fmt.Sprint(i)),
				Labels: map[string]string{v1alpha1.OriginLabel: "jobferry"}}}
			fill(j)
			return j
		}, func(obj any) any {
			kept := transformMirror(obj)
			if why, over := OverBudget(&kept.(*cachedMirror).ObjectMeta); over {
				t.Fatalf("%s: a Job within the budget was kept as its identity only: %s", name, why)
			}
			return kept
		})
		t.Logf("%s at the budget: %d bytes kept per Job", name, per)
		if per > maxRetainedMirror {
			t.Errorf("%s at the budget: the mirror cache keeps %d bytes per Job, over %d", name, per, maxRetainedMirror)
		}
	}
}

// A Job over the budget is kept as its identity and jobferry's identity
// labels, and says why; its other jobferry.dev/ labels are not kept.
func TestMirrorOverBudgetIsKeptAsItsIdentity(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "flood", Name: "forged", UID: "u1", ResourceVersion: "9",
		Labels: map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "x", v1alpha1.DispatchAttemptLabel: "1",
			v1alpha1.ManagerIDLabel: "mallory", "jobferry.dev/x-1": "v"}}}
	job.Spec.Template.Spec.NodeSelector = map[string]string{"big": strings.Repeat("n", 1<<20)}
	job.Status.Active = 3
	got := SlimMirror(job)
	why, over := OverBudget(got)
	if !over || why != "spec.template.spec.nodeSelector takes what the manager would keep of it to 5 entries and 1 MiB, over its budget of 256 entries and 16 KiB" {
		t.Fatalf("over budget %v: %q", over, why)
	}
	want := map[string]string{v1alpha1.OriginLabel: "jobferry", v1alpha1.OriginUIDLabel: "x", v1alpha1.DispatchAttemptLabel: "1", v1alpha1.ManagerIDLabel: "mallory"}
	if got.UID != "u1" || got.ResourceVersion != "9" || fmt.Sprint(got.Labels) != fmt.Sprint(want) {
		t.Errorf("identity %s %s %v, want u1 9 %v", got.UID, got.ResourceVersion, got.Labels, want)
	}
	if got.Spec.Template.Spec.NodeSelector != nil || got.Status.Active != 0 {
		t.Errorf("kept more than the identity: %+v %+v", got.Spec, got.Status)
	}
	// Within the budget, only the identity labels of jobferry's.
	job.Spec.Template.Spec.NodeSelector = nil
	if got := SlimMirror(job); IsOverBudget(got) || fmt.Sprint(got.Labels) != fmt.Sprint(want) || got.Status.Active != 3 {
		t.Errorf("within the budget: over %v, labels %v, active %d", IsOverBudget(got), got.Labels, got.Status.Active)
	}
}

// A capacity summary filled at random keeps at most maxRetainedCapacity
// (counting the heap of all over the summaries kept whole), the larger
// ones kept as their identity only.
func TestCapacityCacheKeepsAtMostItsBudget(t *testing.T) {
	const n = 40
	tally := &overBudgetTally{}
	transform := capacityTransform(tally)
	total := heapretained.Bytes(n, func(i int) any {
		cc := &v1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ClusterCapacityName}}
		filler(int64(i), 1+(i%10)*10, (i%5)*100).Fill(&cc.Status)
		return cc
	}, func(obj any) any {
		kept, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return kept
	})
	over, _ := tally.take()
	whole := n - over
	t.Logf("capacity summaries filled at random: %d of %d kept whole, %d bytes kept per summary kept whole", whole, n, total/max(whole, 1))
	if whole == 0 || over == 0 {
		t.Fatalf("%d of %d summaries over the budget: the fill does not span it", over, n)
	}
	if per := total / whole; per > maxRetainedCapacity {
		t.Errorf("the capacity cache keeps %d bytes per summary, over %d", per, maxRetainedCapacity)
	}
}

// A Warning Event filled at random, with strings of up to 64 KiB, is
// forwarded as at most maxRetainedEvent.
func TestForwardedEventsKeepAtMostTheirBounds(t *testing.T) {
	const n = 200
	per := retainedPerObject(n, func(i int) any {
		ev := &corev1.Event{}
		filler(int64(i), 4, 64<<10).Fill(ev)
		return ev
	}, func(obj any) any { return slimEvent(obj.(*corev1.Event)) })
	t.Logf("Events filled at random: %d bytes kept per Event", per)
	if per > maxRetainedEvent {
		t.Errorf("a forwarded Event keeps %d bytes, over %d", per, maxRetainedEvent)
	}
}
