package dispatch

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func res(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func pool(name string, free, allocatable corev1.ResourceList, mods ...func(*v1alpha1.NodePool)) v1alpha1.NodePool {
	p := v1alpha1.NodePool{Name: name, Labels: map[string]string{v1alpha1.DefaultPoolLabel: name}, Free: free, Allocatable: allocatable}
	for _, m := range mods {
		m(&p)
	}
	return p
}

var gpuTaint = corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

func tainted(p *v1alpha1.NodePool) { p.Taints = []corev1.Taint{gpuTaint} }

func worker(name string, pools ...v1alpha1.NodePool) Worker {
	return Worker{Name: name, Connected: true, Pools: pools}
}

// job requests cpu per pod and runs parallelism pods at once.
func job(cpu string, parallelism int32, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Resources: corev1.ResourceRequirements{Requests: res("cpu", cpu)},
			}}}},
		},
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

// selectPool gives the Job's pods a nodeSelector for the pool name.
func selectPool(name string) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.DefaultPoolLabel: name}
	}
}

func TestPlace(t *testing.T) {
	idle := res("cpu", "10", "pods", "100")
	tolerateGPU := func(j *batchv1.Job) {
		j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	}
	cases := map[string]struct {
		job      *batchv1.Job
		workers  []Worker
		want     string // "worker/pool", or "" when nothing fits
		rejected map[string]string
		// codes are the reason codes of the workers rejected.
		codes map[string]string
	}{
		"the freer worker wins": {
			job: job("1", 1),
			workers: []Worker{
				worker("a", pool("general", res("cpu", "4", "pods", "100"), idle)),
				worker("b", pool("general", res("cpu", "8", "pods", "100"), idle)),
			},
			want:     "b/general",
			rejected: map[string]string{"a": "fits, but pool general would keep 30% free against 70% on b"},
		},
		"ties go to the first name": {
			job:      job("1", 1),
			workers:  []Worker{worker("b", pool("general", idle, idle)), worker("a", pool("general", idle, idle))},
			want:     "a/general",
			rejected: map[string]string{"b": "fits, but pool general would keep 90% free against 90% on a"},
		},
		"assumed placements count against free capacity": {
			job: job("1", 1),
			workers: []Worker{
				{Name: "a", Connected: true, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}, Assumed: map[string]corev1.ResourceList{"general": res("cpu", "5")}},
				worker("b", pool("general", res("cpu", "8", "pods", "100"), idle)),
			},
			want:     "b/general",
			rejected: map[string]string{"a": "fits, but pool general would keep 40% free against 70% on b"},
		},
		"parallelism times the pod request must fit": {
			job:      job("3", 4),
			workers:  []Worker{worker("a", pool("general", idle, idle))},
			rejected: map[string]string{"a": "pool general: needs 12 cpu, 10 free"},
			codes:    map[string]string{"a": ReasonInsufficientCapacity},
		},
		"completions below parallelism bound the pods": {
			job:     job("3", 4, func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](3) }),
			workers: []Worker{worker("a", pool("general", idle, idle))},
			want:    "a/general",
		},
		"a resource the pool does not offer": {
			job: job("1", 1, func(j *batchv1.Job) {
				j.Spec.Template.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
			}),
			workers:  []Worker{worker("a", pool("general", idle, idle))},
			rejected: map[string]string{"a": "pool general: needs 1 example.com/gpu, 0 free"},
			codes:    map[string]string{"a": ReasonInsufficientCapacity},
		},
		"an untolerated taint rejects the pool": {
			job:      job("1", 1, selectPool("gpu")),
			workers:  []Worker{worker("a", pool("gpu", idle, idle, tainted))},
			rejected: map[string]string{"a": "pool gpu: untolerated taint gpu=true:NoSchedule"},
			codes:    map[string]string{"a": ReasonNoPoolAccepts},
		},
		"the Job's toleration admits the tainted pool": {
			job:     job("1", 1, selectPool("gpu"), tolerateGPU),
			workers: []Worker{worker("a", pool("general", idle, idle), pool("gpu", idle, idle, tainted))},
			want:    "a/gpu",
		},
		"the worker's directives are merged before the pool check": {
			job: job("1", 1, selectPool("gpu")),
			workers: []Worker{{
				Name: "a", Connected: true, Pools: []v1alpha1.NodePool{pool("gpu", idle, idle, tainted)},
				Directives: v1alpha1.SchedulingDirectives{Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}},
			}},
			want: "a/gpu",
		},
		"a worker nodeSelector conflicting with the Job's": {
			job: job("1", 1, selectPool("gpu")),
			workers: []Worker{{
				Name: "a", Connected: true, Pools: []v1alpha1.NodePool{pool("general", idle, idle)},
				Directives: v1alpha1.SchedulingDirectives{NodeSelector: map[string]string{v1alpha1.DefaultPoolLabel: "general"}},
			}},
			rejected: map[string]string{"a": "nodeSelector jobferry.dev/pool=gpu conflicts with the worker's jobferry.dev/pool=general"},
			codes:    map[string]string{"a": ReasonInvalidDirectives},
		},
		"required node affinity must match the pool labels": {
			job: job("1", 1, func(j *batchv1.Job) {
				j.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.DefaultPoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"big"}}},
					}}},
				}}
			}),
			workers: []Worker{worker("a", pool("general", idle, idle)), worker("b", pool("big", idle, idle))},
			want:    "b/big",
			rejected: map[string]string{
				"a": "pool general: labels do not match the nodeSelector or required node affinity",
			},
			codes: map[string]string{"a": ReasonNoPoolAccepts},
		},
		"disconnected, cordoned, excluded and unsummarised workers": {
			job: job("1", 1, func(j *batchv1.Job) {
				j.Name = "j"
				j.Annotations = map[string]string{v1alpha1.ExcludedWorkersAnnotation: "x,c"}
			}),
			workers: []Worker{
				{Name: "a", Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "b", Connected: true, Cordoned: true, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "c", Connected: true, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "d", Connected: true},
			},
			rejected: map[string]string{
				"a": "not connected",
				"b": "cordoned",
				"c": "a Job ns/j not created by jobferry exists there",
				"d": "no capacity summary from the worker yet",
			},
			codes: map[string]string{"a": ReasonNotConnected, "b": ReasonCordoned, "c": ReasonExcluded, "d": ReasonNoCapacitySummary},
		},
		"what the manager found of the worker's credential and namespace": {
			job: job("1", 1),
			workers: []Worker{
				{Name: "a", Connected: true, MissingRights: "its credential may not create jobs.batch", Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "b", Connected: true, Namespace: NamespaceVerdict{ReasonNamespaceMissing, "namespace ns does not exist there"}, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "c", Connected: true, Namespace: NamespaceVerdict{ReasonPodSecurity, "its namespace ns enforces PodSecurity weaker"}, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "d", Connected: true, Namespace: NamespaceVerdict{ReasonNamespaceUnreadable, "reading namespace ns there failed"}, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
			},
			rejected: map[string]string{
				"a": "its credential may not create jobs.batch",
				"b": "namespace ns does not exist there",
				"c": "its namespace ns enforces PodSecurity weaker",
				"d": "reading namespace ns there failed",
			},
			codes: map[string]string{"a": ReasonMissingRights, "b": ReasonNamespaceMissing, "c": ReasonPodSecurity, "d": ReasonNamespaceUnreadable},
		},
		"a worker limited to some namespaces takes Jobs from those only": {
			job: job("1", 1, func(j *batchv1.Job) { j.Namespace = "team-a" }),
			workers: []Worker{
				{Name: "a", Connected: true, Namespaces: []string{"team-b", "team-c"}, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "b", Connected: true, Namespaces: []string{"team-a"}, Pools: []v1alpha1.NodePool{pool("general", res("cpu", "1", "pods", "1"), idle)}},
			},
			want:     "b/general",
			rejected: map[string]string{"a": "the manager may use only namespaces team-b, team-c there (spec.namespaces), not team-a"},
			codes:    map[string]string{"a": ReasonNamespaceNotUsable},
		},
		"cluster selector on worker labels": {
			job: job("1", 1, func(j *batchv1.Job) {
				j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: "region in (eu)"}
			}),
			workers: []Worker{
				{Name: "us", Connected: true, Labels: map[string]string{"region": "us"}, Pools: []v1alpha1.NodePool{pool("general", idle, idle)}},
				{Name: "eu", Connected: true, Labels: map[string]string{"region": "eu"}, Pools: []v1alpha1.NodePool{pool("general", res("cpu", "1", "pods", "1"), idle)}},
			},
			want:     "eu/general",
			rejected: map[string]string{"us": `labels do not match cluster selector "region in (eu)"`},
			codes:    map[string]string{"us": ReasonClusterSelector},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := Place(tc.job, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if d.Placed() {
				got = d.Worker + "/" + d.Pool
			}
			if got != tc.want {
				t.Errorf("placed on %q, want %q (%s)", got, tc.want, d.Summary())
			}
			want := tc.rejected
			if want == nil {
				want = map[string]string{}
			}
			if diff := cmp.Diff(want, d.Rejected); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
			codes := tc.codes
			if codes == nil {
				codes = map[string]string{}
			}
			if diff := cmp.Diff(codes, d.Codes); diff != "" {
				t.Errorf("reason codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlaceRejectsMalformedClusterSelector(t *testing.T) {
	j := job("1", 1, func(j *batchv1.Job) {
		j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: "region in eu"}
	})
	_, err := Place(j, []Worker{worker("a")})
	if err == nil || !strings.Contains(err.Error(), v1alpha1.ClusterSelectorAnnotation) {
		t.Errorf("got %v, want an error naming the annotation", err)
	}
}

// A burst of identical Jobs over two equal workers alternates between them
// once each placement is assumed.
func TestPlaceSpreadsABurstWithTheAssumeCache(t *testing.T) {
	idle := res("cpu", "100", "pods", "1000")
	workers := []Worker{worker("a", pool("general", idle, idle)), worker("b", pool("general", idle, idle))}
	counts := map[string]int{}
	for range 40 {
		d, err := Place(job("1", 1), workers)
		if err != nil || !d.Placed() {
			t.Fatalf("not placed: %v %s", err, d.Summary())
		}
		counts[d.Worker]++
		for i := range workers {
			if workers[i].Name == d.Worker {
				if workers[i].Assumed == nil {
					workers[i].Assumed = map[string]corev1.ResourceList{}
				}
				workers[i].Assumed[d.Pool] = add(workers[i].Assumed[d.Pool], d.Request)
			}
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 20, "b": 20}, counts); diff != "" {
		t.Errorf("placements per worker (-want +got):\n%s", diff)
	}
}

// Placement quality at 50 workers of eight sizes (16 to 128 CPUs): a burst
// of one-CPU Jobs filling half the total spreads in proportion to each
// worker's capacity (within ±10 % of its share); once a worker is lost or
// its summary shows it full, the next placements go elsewhere; filled to
// the brim, no worker is given more than its published room.
func TestPlaceSpreadsInProportionToCapacityAcross50Workers(t *testing.T) {
	const n = 50
	workers := make([]Worker, n)
	total := 0
	for i := range workers {
		cpus := 16 * (1 + i%8)
		total += cpus
		idle := res("cpu", fmt.Sprint(cpus), "pods", "10000")
		workers[i] = worker(fmt.Sprintf("w%02d", i), pool("general", idle, idle))
		workers[i].Assumed = map[string]corev1.ResourceList{}
	}
	capacity := func(i int) int { return 16 * (1 + i%8) }
	counts := map[string]int{}
	place := func() (Decision, bool) {
		t.Helper()
		d, err := Place(job("1", 1), workers)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Placed() {
			return d, false
		}
		counts[d.Worker]++
		for i := range workers {
			if workers[i].Name == d.Worker {
				workers[i].Assumed[d.Pool] = add(workers[i].Assumed[d.Pool], d.Request)
			}
		}
		return d, true
	}
	for range total / 2 {
		if d, ok := place(); !ok {
			t.Fatalf("not placed with half the capacity free: %s", d.Summary())
		}
	}
	worst := 0.0
	for i, w := range workers {
		share := float64(total/2) * float64(capacity(i)) / float64(total)
		off := (float64(counts[w.Name]) - share) / share
		worst = max(worst, math.Abs(off))
		if math.Abs(off) > 0.10 {
			t.Errorf("%s (%d CPUs) got %d Jobs, its capacity-proportional share is %.1f (%+.0f%%)", w.Name, capacity(i), counts[w.Name], share, off*100)
		}
	}
	t.Logf("%d Jobs over %d workers: the largest deviation from the capacity-proportional share is %.1f%%", total/2, n, worst*100)

	// w07 (the largest) is lost; w15 (as large) reports itself full.
	workers[7].Connected = false
	workers[15].Pools[0].Free = res("cpu", "0", "pods", "10000")
	frozen := map[int]int{7: counts["w07"], 15: counts["w15"]}
	for range 100 {
		if d, ok := place(); !ok || d.Worker == "w07" || d.Worker == "w15" {
			t.Fatalf("placed on %q (lost or full) or not at all: %s", d.Worker, d.Summary())
		}
	}

	// Filled to the brim: every other worker takes exactly its room.
	for {
		if _, ok := place(); !ok {
			break
		}
	}
	for i, w := range workers {
		room := capacity(i)
		if c, ok := frozen[i]; ok {
			room = c // nothing more once lost or full
		}
		if counts[w.Name] != room {
			t.Errorf("%s (%d CPUs) was given %d one-CPU Jobs, want %d", w.Name, capacity(i), counts[w.Name], room)
		}
	}
}

func add(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range b {
		v := out[name]
		v.Add(q)
		out[name] = v
	}
	return out
}

func TestJobRequest(t *testing.T) {
	cases := map[string]struct {
		job  *batchv1.Job
		want corev1.ResourceList
	}{
		"parallelism pods": {job: job("500m", 3), want: res("cpu", "1500m", "pods", "3")},
		"unset parallelism is one pod": {
			job:  job("2", 1, func(j *batchv1.Job) { j.Spec.Parallelism = nil }),
			want: res("cpu", "2", "pods", "1"),
		},
		"an init container larger than the containers sets the pod request": {
			job: job("1", 2, func(j *batchv1.Job) {
				j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: res("cpu", "4")}}}
			}),
			want: res("cpu", "8", "pods", "2"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := JobRequest(tc.job)
			for _, n := range sortedNames(tc.want) {
				if w, g := tc.want[n], got[n]; w.Cmp(g) != 0 {
					t.Errorf("%s: got %s, want %s", n, g.String(), w.String())
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got resources %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGistLeavesOutTheFigures: a Job that waits says so again only when the
// reasons change, not whenever the free amounts do.
func TestGistLeavesOutTheFigures(t *testing.T) {
	j := job("12", 1)
	cordoned := worker("b", pool("general", res("cpu", "100"), res("cpu", "100")))
	cordoned.Cordoned = true
	place := func(free string) Decision {
		d, err := Place(j, []Worker{worker("a", pool("general", res("cpu", free), res("cpu", "16"))), cordoned})
		if err != nil || d.Placed() {
			t.Fatalf("placed %v, %v; want no worker to fit", d, err)
		}
		return d
	}
	ten, eleven := place("10"), place("11")
	if want := "no worker fits; a: pool general: not enough cpu free, b: cordoned"; ten.Gist() != want {
		t.Errorf("Gist() = %q, want %q", ten.Gist(), want)
	}
	if ten.Gist() != eleven.Gist() {
		t.Errorf("gists differ with the free amount: %q, %q", ten.Gist(), eleven.Gist())
	}
	if ten.Summary() == eleven.Summary() || !strings.Contains(ten.Summary(), "needs 12 cpu, 10 free") {
		t.Errorf("Summary() = %q: the Event keeps the figures", ten.Summary())
	}
}

func TestAdmits(t *testing.T) {
	general := v1alpha1.NodePool{Name: "general", Labels: map[string]string{"pool": "general"}}
	gpu := v1alpha1.NodePool{Name: "gpu", Labels: map[string]string{"pool": "gpu"},
		Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	job := func(mutate func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}}
		if mutate != nil {
			mutate(j)
		}
		return j
	}
	cases := map[string]struct {
		job      *batchv1.Job
		worker   Worker
		wantCode string
	}{
		"a full pool still admits":      {job: job(nil), worker: Worker{Name: "w1", Pools: []v1alpha1.NodePool{general}}},
		"no summary: pools not checked": {job: job(nil), worker: Worker{Name: "w1"}},
		"cordoned and disconnected: not checked": {
			job: job(nil), worker: Worker{Name: "w1", Cordoned: true, Pools: []v1alpha1.NodePool{general}},
		},
		"namespace not usable": {
			job: job(nil), worker: Worker{Name: "w1", Namespaces: []string{"team-b"}}, wantCode: ReasonNamespaceNotUsable,
		},
		"excluded: a same-named Job jobferry did not create is there": {
			job:    job(func(j *batchv1.Job) { j.Annotations = map[string]string{v1alpha1.ExcludedWorkersAnnotation: "w1"} }),
			worker: Worker{Name: "w1"}, wantCode: ReasonExcluded,
		},
		"its namespace there enforces a weaker level": {
			job: job(nil), worker: Worker{Name: "w1", Namespace: NamespaceVerdict{ReasonPodSecurity, "weaker"}}, wantCode: ReasonPodSecurity,
		},
		"cluster selector no longer matches": {
			job: job(func(j *batchv1.Job) {
				j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: "zone=b"}
			}),
			worker: Worker{Name: "w1", Labels: map[string]string{"zone": "a"}}, wantCode: ReasonClusterSelector,
		},
		"a template no pool accepts": {
			job:    job(func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"} }),
			worker: Worker{Name: "w1", Pools: []v1alpha1.NodePool{general, gpu}}, wantCode: ReasonNoPoolAccepts,
		},
		"the toleration that lets it onto the tainted pool": {
			job: job(func(j *batchv1.Job) {
				j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			}),
			worker: Worker{Name: "w1", Pools: []v1alpha1.NodePool{general, gpu}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, why := Admits(tc.job, tc.worker)
			if code != tc.wantCode || (code == "") != (why == "") {
				t.Errorf("Admits = %q, %q; want code %q", code, why, tc.wantCode)
			}
		})
	}
}

func TestNeverFits(t *testing.T) {
	idle := res("cpu", "10", "pods", "100")
	busy := res("cpu", "0", "pods", "100")
	cases := map[string]struct {
		job     *batchv1.Job
		workers []Worker
		want    string
	}{
		"a pool that is full now may free up": {
			job: job("4", 1), workers: []Worker{worker("a", pool("general", busy, idle))},
		},
		"more than any pool's allocatable at once": {
			job: job("4", 3), workers: []Worker{worker("a", pool("general", idle, idle)), worker("b", pool("general", busy, idle))},
			want: "a: pool general: needs 12 cpu at once, its nodes have 10 allocatable; b: pool general: needs 12 cpu at once, its nodes have 10 allocatable",
		},
		"no pool's nodes accept the pods": {
			job: job("1", 1, selectPool("gpu")), workers: []Worker{worker("a", pool("general", idle, idle))},
			want: "a: pool general: labels do not match the nodeSelector or required node affinity",
		},
		"one worker that might is enough": {
			job:     job("4", 3),
			workers: []Worker{worker("a", pool("general", idle, idle)), worker("b", pool("big", idle, res("cpu", "16", "pods", "100")))},
		},
		"a worker not connected might": {
			job:     job("4", 3),
			workers: []Worker{worker("a", pool("general", idle, idle)), {Name: "b"}},
		},
		"a worker without a capacity summary might": {
			job:     job("4", 3),
			workers: []Worker{worker("a", pool("general", idle, idle)), {Name: "b", Connected: true}},
		},
		"a cordoned worker whose pool could hold it might": {
			job:     job("1", 1),
			workers: []Worker{{Name: "a", Connected: true, Cordoned: true, Pools: []v1alpha1.NodePool{pool("general", busy, idle)}}},
		},
		"missing rights are the administrator's to fix": {
			job:     job("1", 1),
			workers: []Worker{{Name: "a", Connected: true, MissingRights: "create jobs", Pools: []v1alpha1.NodePool{pool("general", idle, idle)}}},
		},
		"the cluster selector matches no worker": {
			job: job("1", 1, func(j *batchv1.Job) {
				j.Annotations = map[string]string{v1alpha1.ClusterSelectorAnnotation: "region=mars"}
			}),
			workers: []Worker{worker("a", pool("general", idle, idle))},
			want:    `a: labels do not match cluster selector "region=mars"`,
		},
		"no workers at all: it waits for one": {job: job("1", 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NeverFits(tc.job, tc.workers); got != tc.want {
				t.Errorf("NeverFits = %q, want %q", got, tc.want)
			}
		})
	}
}
