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

	"github.com/jobferry/jobferry/e2e/follow"
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
}

// InspectionFigures compare dispatch while tenants follow logs with the
// jobferry arm of the same run, whose Jobs were created alike while the
// tenants' pods ran with nobody following them: what following costs,
// apart from what running the pods does.
type InspectionFigures struct {
	InspectionLoad
	// Followed is the jobferry arm again, while every tenant follows.
	Followed Arm `json:"followed"`
	// DispatchP50Ratio and DispatchP99Ratio are the followed arm's dispatch
	// overhead (created on the manager → mirror seen on its worker)
	// percentiles over the jobferry arm's.
	DispatchP50Ratio float64 `json:"dispatchP50Ratio"`
	DispatchP99Ratio float64 `json:"dispatchP99Ratio"`
	// StillFollowing is how many follows were still streaming when the
	// followed arm ended (none cut off meanwhile).
	StillFollowing int `json:"stillFollowing"`
	// LinesStreamed is how many log lines the follows printed during the
	// followed arm, and StreamedPerSecond that over the arm's seconds: the
	// load the manager carried.
	LinesStreamed     int     `json:"linesStreamed"`
	StreamedPerSecond float64 `json:"streamedLinesPerSecond"`
}

// tenants are the users of an inspection load and their running Jobs, in
// tenantsNamespace(n).
type tenants struct {
	ns    string
	users []string
	jobs  []string
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
	var running int
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		running = 0
		for _, name := range t.jobs {
			job, err := b.manager.BatchV1().Jobs(t.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if job.Status.Active == load.PodsEach {
				running++
			}
		}
		return running == len(t.jobs), nil
	})
	if err != nil {
		return nil, fmt.Errorf("inspection load: %d of the tenants' %d Jobs have all %d pods running: %w", running, len(t.jobs), load.PodsEach, err)
	}
	return t, nil
}

// followedArm has every tenant follow the logs of its Job's pods with the
// real plugin, runs the jobferry arm again meanwhile, and compares its
// dispatch with quiet's; then it stops the follows and deletes the
// tenants' Jobs.
func (b *bencher) followedArm(ctx context.Context, n int, t *tenants, quiet Arm) (_ *InspectionFigures, err error) {
	load := b.cfg.InspectionLoad
	fmt.Fprintf(b.cfg.Progress, "inspection load, N=%d: the tenants follow their logs\n", n)
	var followers []*follow.Follower
	defer func() {
		for _, f := range followers {
			f.Stop()
		}
		if _, cleanErr := b.cleanUpArm(ctx, []kubernetes.Interface{b.manager}, t.ns, len(t.jobs), "the tenants' Jobs"); cleanErr != nil {
			err = errors.Join(err, cleanErr)
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
	linesBefore := linesOf(followers)
	feedCtx, stopFeeding := context.WithCancel(ctx)
	fed := make(chan error, 1)
	go func() { fed <- b.feedLogs(feedCtx, load.LinesPerSecond) }()
	start := time.Now()
	arm, err := b.dispatched(ctx, n, followedArm)
	took := time.Since(start)
	stopFeeding()
	if feedErr := <-fed; err == nil && feedErr != nil {
		err = fmt.Errorf("inspection load: %w", feedErr)
	}
	if err != nil {
		return nil, err
	}
	streamed := linesOf(followers) - linesBefore
	figures := &InspectionFigures{InspectionLoad: *load, Followed: arm,
		LinesStreamed: streamed, StreamedPerSecond: float64(streamed) / took.Seconds(),
		DispatchP50Ratio: ratio(arm.DispatchOverhead.P50, quiet.DispatchOverhead.P50),
		DispatchP99Ratio: ratio(arm.DispatchOverhead.P99, quiet.DispatchOverhead.P99),
	}
	for _, f := range followers {
		if f.Running() {
			figures.StillFollowing++
		}
	}
	return figures, nil
}

// feedLogs appends a line to every worker's containers' log perSecond
// times a second until ctx ends.
func (b *bencher) feedLogs(ctx context.Context, perSecond float64) error {
	if perSecond <= 0 {
		return nil
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, w := range b.env.Workers {
			if err := w.AppendContainerLog(fmt.Sprintf("bench line %d on %s", i, w.Name)); err != nil {
				return err
			}
		}
	}
}

// linesOf is how many log lines the followers printed so far.
func linesOf(followers []*follow.Follower) int {
	n := 0
	for _, f := range followers {
		n += f.Lines()
	}
	return n
}
