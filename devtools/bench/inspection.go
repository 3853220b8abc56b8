package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/follow"
)

// InspectionLoad is what tenants do to the inspection API during a
// followed arm (issue 44's measurement): each follows the logs of every pod
// of a Job of its own.
type InspectionLoad struct {
	Tenants  int   `json:"tenants"`
	PodsEach int32 `json:"podsEach"`
	// LinesPerSecond is how many lines every container on the workers
	// prints a second while the tenants follow (appended to the file KWOK
	// serves every container's log from): each followed pod's stream
	// carries them through the manager.
	LinesPerSecond float64 `json:"linesPerSecond"`
	// Rounds is how many times a followed arm and a quiet arm after it
	// follow the jobferry arm, alternately: quiet arms on both sides of
	// every followed one, so that drift over the run (a compaction, the
	// collector, a neighbour on the host) falls on both.
	Rounds int `json:"rounds"`
}

// InspectionFigures compare dispatch while tenants follow logs with the
// quiet arms of the same run, whose Jobs were created alike while the
// tenants' pods ran with nobody following them: what following costs,
// apart from what running the pods does.
type InspectionFigures struct {
	InspectionLoad
	// PerRound are the followed arms and the quiet arms after them, in the
	// order they ran (the jobferry arm before the first).
	PerRound []InspectionRound `json:"perRound"`
	// Quiet pools the dispatch overhead (created on the manager → mirror
	// seen on its worker) of the jobferry arm and every after arm,
	// Following that of every followed arm; DispatchP50Ratio and
	// DispatchP99Ratio are Following's percentiles over Quiet's.
	Quiet            Percentiles `json:"quietDispatchOverhead"`
	Following        Percentiles `json:"followingDispatchOverhead"`
	DispatchP50Ratio float64     `json:"dispatchP50Ratio"`
	DispatchP99Ratio float64     `json:"dispatchP99Ratio"`
	// QuietP99Spread is the largest quiet arm's dispatch p99 over the
	// smallest: how far quiet arms alone differ in this run.
	QuietP99Spread float64 `json:"quietP99Spread"`
}

// InspectionRound is one followed arm and the quiet arm after it.
type InspectionRound struct {
	// Followed is the jobferry arm again while every tenant follows; After
	// is it once more when they stopped.
	Followed Arm `json:"followed"`
	After    Arm `json:"after"`
	// P99Ratio is Followed's dispatch p99 over the mean of its neighbours'
	// (the quiet arm before it and After).
	P99Ratio float64 `json:"p99RatioToNeighbours"`
	// LinesFed is how many lines were appended to each worker's containers'
	// log during the followed arm, LinesExpected what the follows should
	// have printed of them (every followed pod each), and LinesStreamed what
	// they did; StreamedPerSecond is that over the arm's seconds.
	LinesFed          int     `json:"linesFed"`
	LinesExpected     int     `json:"linesExpected"`
	LinesStreamed     int     `json:"linesStreamed"`
	StreamedPerSecond float64 `json:"streamedLinesPerSecond"`
	// FollowersCPU is the CPU seconds the tenants' plugins took during the
	// followed arm (unpinned: on either half of the CPUs).
	FollowersCPU float64 `json:"followersCPUSeconds"`
	// StreamsOpen is how many of the followed pods' streams printed a line
	// appended once the followed arm ended (within 30 s): the streams the
	// manager still carried.
	StreamsOpen int `json:"streamsOpen"`
}

// tenants are the users of an inspection load and their running Jobs, in
// tenantsNamespace(n).
type tenants struct {
	ns    string
	users []string
	jobs  []string
	// on is the worker each Job runs on: its pods take room the bench's
	// Jobs do not have meanwhile.
	on []string
}

// startTenants makes the tenants of the inspection load (rights to follow
// logs in their namespace, as follow.Rules), has each create a Job of
// PodsEach pods, and returns once all of them run: from the jobferry arm
// on, the workers hold them.
func (b *bencher) startTenants(ctx context.Context, n int) (*tenants, error) {
	load := b.cfg.InspectionLoad
	t := &tenants{ns: tenantsNamespace(n)}
	optIn, err := dispatchLabels()
	if err != nil {
		return nil, err
	}
	if err := createNamespace(ctx, b.manager, t.ns, optIn); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.cfg.Progress, "inspection load, N=%d: %d tenants each running a Job of %d pods\n", n, load.Tenants, load.PodsEach)
	for i := range load.Tenants {
		user := fmt.Sprintf("tenant-%d", i+1)
		if err := follow.BindTenant(ctx, b.manager, t.ns, user); err != nil {
			return nil, err
		}
		cfg := benchConfig(b.env.Manager)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		asTenant, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		job := follow.Job(t.ns, "followed-"+user, load.PodsEach)
		if _, err := asTenant.BatchV1().Jobs(t.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating Job %s/%s as %s: %w", t.ns, job.Name, user, err)
		}
		t.users, t.jobs = append(t.users, user), append(t.jobs, job.Name)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		t.on = t.on[:0]
		for _, name := range t.jobs {
			job, err := b.manager.BatchV1().Jobs(t.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if job.Status.Active == load.PodsEach {
				t.on = append(t.on, job.Annotations[v1alpha1.WorkerAnnotation])
			}
		}
		return len(t.on) == len(t.jobs), nil
	})
	if err != nil {
		return nil, fmt.Errorf("inspection load: %d of the tenants' %d Jobs have all %d pods running: %w", len(t.on), len(t.jobs), load.PodsEach, err)
	}
	for _, worker := range t.on {
		b.room[worker] -= int(load.PodsEach)
	}
	return t, nil
}

// inspectionArms runs Rounds followed arms, each with a quiet arm after
// it, compares them with the quiet arms (before: the jobferry arm, run with
// the tenants' pods and nobody following), and deletes the tenants' Jobs.
func (b *bencher) inspectionArms(ctx context.Context, n int, t *tenants, before Arm) (_ *InspectionFigures, err error) {
	defer func() {
		if _, cleanErr := b.cleanUpArm(ctx, []kubernetes.Interface{b.manager}, t.ns, timeout(len(t.jobs)), "the tenants' Jobs"); cleanErr != nil {
			err = errors.Join(err, cleanErr)
		}
		for _, worker := range t.on {
			b.room[worker] += int(b.cfg.InspectionLoad.PodsEach)
		}
	}()
	figures := &InspectionFigures{InspectionLoad: *b.cfg.InspectionLoad}
	quiet, following := []Arm{before}, []Arm(nil)
	for r := 1; r <= figures.Rounds; r++ {
		round, err := b.followed(ctx, n, r, t)
		if err != nil {
			return nil, err
		}
		if round.After, err = b.dispatched(ctx, n, afterArm, r); err != nil {
			return nil, err
		}
		round.P99Ratio = ratio(round.Followed.DispatchOverhead.P99, (quiet[len(quiet)-1].DispatchOverhead.P99+round.After.DispatchOverhead.P99)/2)
		fmt.Fprintf(b.cfg.Progress, "inspection load, N=%d, round %d: dispatch p99 %.2f s before, %.2f s following, %.2f s after (%.2f× their mean)\n",
			n, r, quiet[len(quiet)-1].DispatchOverhead.P99, round.Followed.DispatchOverhead.P99, round.After.DispatchOverhead.P99, round.P99Ratio)
		figures.PerRound = append(figures.PerRound, *round)
		quiet, following = append(quiet, round.After), append(following, round.Followed)
	}
	figures.Quiet, figures.Following = pooledOverhead(quiet), pooledOverhead(following)
	figures.DispatchP50Ratio = ratio(figures.Following.P50, figures.Quiet.P50)
	figures.DispatchP99Ratio = ratio(figures.Following.P99, figures.Quiet.P99)
	figures.QuietP99Spread = spread(quiet)
	return figures, nil
}

// pooledOverhead is the percentiles of the dispatch overheads of all arms
// together.
func pooledOverhead(arms []Arm) Percentiles {
	var all []time.Duration
	for _, a := range arms {
		all = append(all, a.overheads...)
	}
	return percentiles(all)
}

// spread is the largest dispatch p99 of arms over the smallest.
func spread(arms []Arm) float64 {
	lo, hi := 0.0, 0.0
	for i, a := range arms {
		p := a.DispatchOverhead.P99
		if i == 0 || p < lo {
			lo = p
		}
		hi = max(hi, p)
	}
	return ratio(hi, lo)
}

// followed has every tenant follow the logs of its Job's pods with the
// real plugin, lines appended to every container's log meanwhile, and runs
// the jobferry arm again (round r of Rounds); then it checks which streams
// are still open and stops the follows.
func (b *bencher) followed(ctx context.Context, n, r int, t *tenants) (*InspectionRound, error) {
	load := b.cfg.InspectionLoad
	fmt.Fprintf(b.cfg.Progress, "inspection load, N=%d, round %d: the tenants follow their logs\n", n, r)
	var followers []*follow.Follower
	defer func() {
		for _, f := range followers {
			f.Stop()
		}
	}()
	for i, user := range t.users {
		f, err := follow.Start(ctx, b.env.Manager.KubeconfigPath, t.ns, user, t.jobs[i])
		if err != nil {
			return nil, err
		}
		followers = append(followers, f)
	}
	if err := follow.WaitStreaming(ctx, followers, int(load.PodsEach), 2*time.Minute); err != nil {
		return nil, fmt.Errorf("inspection load: %w", err)
	}
	// Lines of this arm only: the follows print each log from its start,
	// earlier arms' lines included.
	marker := fmt.Sprintf("bench-followed-%d-%d line", n, r)
	feedCtx, stopFeeding := context.WithCancel(ctx)
	type feedResult struct {
		lines int
		err   error
	}
	fed := make(chan feedResult, 1)
	go func() {
		lines, err := b.feedLogs(feedCtx, marker, load.LinesPerSecond)
		fed <- feedResult{lines, err}
	}()
	pluginsBefore, err := followersCPU(followers)
	if err != nil {
		stopFeeding()
		<-fed
		return nil, err
	}
	start := time.Now()
	arm, err := b.dispatched(ctx, n, followedArm, r)
	took := time.Since(start)
	pluginsAfter, cpuErr := followersCPU(followers)
	stopFeeding()
	feed := <-fed
	if err == nil && feed.err != nil {
		err = fmt.Errorf("inspection load: %w", feed.err)
	}
	if err == nil {
		err = cpuErr
	}
	if err != nil {
		return nil, err
	}
	figures := &InspectionRound{Followed: arm, LinesFed: feed.lines, FollowersCPU: pluginsAfter - pluginsBefore,
		LinesExpected: feed.lines * load.Tenants * int(load.PodsEach)}
	for _, f := range followers {
		figures.LinesStreamed += f.Lines(marker)
	}
	figures.StreamedPerSecond = float64(figures.LinesStreamed) / took.Seconds()

	// A line appended now reaches every stream still open.
	end := fmt.Sprintf("bench-followed-%d-%d end", n, r)
	for _, w := range b.env.Workers {
		if err := w.AppendContainerLog(end); err != nil {
			return nil, err
		}
	}
	if err := follow.WaitLine(ctx, followers, end, int(load.PodsEach), 30*time.Second); err != nil {
		fmt.Fprintf(b.cfg.Progress, "inspection load, N=%d, round %d: not every stream printed the last line: %.300s\n", n, r, err)
	}
	for _, f := range followers {
		figures.StreamsOpen += f.PodsPrinting(end)
	}
	return figures, nil
}

// feedLogs appends a line holding marker to every worker's containers'
// log perSecond times a second until ctx ends, and says how many each got.
func (b *bencher) feedLogs(ctx context.Context, marker string, perSecond float64) (int, error) {
	if perSecond <= 0 {
		return 0, nil
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer tick.Stop()
	for lines := 0; ; lines++ {
		select {
		case <-ctx.Done():
			return lines, nil
		case <-tick.C:
		}
		for _, w := range b.env.Workers {
			if err := w.AppendContainerLog(fmt.Sprintf("%s %d", marker, lines)); err != nil {
				return lines, err
			}
		}
	}
}

// followersCPU is the CPU seconds the followers' plugins took so far.
func followersCPU(followers []*follow.Follower) (float64, error) {
	total := 0.0
	for _, f := range followers {
		cpu, err := cpuSeconds(f.PID)
		if err != nil {
			return 0, fmt.Errorf("the CPU of a tenant's plugin: %w", err)
		}
		total += cpu
	}
	return total, nil
}
