package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// FaultKind is one kind of fault in the nemesis's catalogue.
type FaultKind string

const (
	LeaderKilled              FaultKind = "leader-killed"
	StandbyKilled             FaultKind = "standby-killed"
	ManagersDown              FaultKind = "managers-down"
	WorkerFrozenShort         FaultKind = "worker-frozen-short"
	WorkerFrozenLong          FaultKind = "worker-frozen-long"
	WorkerEtcdRestarted       FaultKind = "worker-etcd-restarted"
	ManagerAPIServerRestarted FaultKind = "manager-apiserver-restarted"
	CredentialRevoked         FaultKind = "credential-revoked"
	WebhookUnreachable        FaultKind = "webhook-unreachable"
	WorkerNamespaceDeleted    FaultKind = "worker-namespace-deleted"
	NodesLost                 FaultKind = "nodes-lost"
	KueueRestarted            FaultKind = "kueue-restarted"
)

// Fault is one fault: as planned from the seed, then as it happened.
type Fault struct {
	Kind FaultKind
	// Offset is when the plan starts it, after the run's start; Lasts how
	// long it holds before it is healed.
	Offset, Lasts time.Duration
	// Pick chooses the target among the candidates (a worker, a manager
	// replica) at the time it starts.
	Pick int
	// Target is what it hit; Start and End when it was injected and healed
	// (End is zero when it never was).
	Target     string    `json:",omitempty"`
	Start, End time.Time `json:",omitzero"`
	// Recovered is when a canary Job made at End (on the fault's worker, for
	// a worker's fault) finished; zero when it did not.
	Recovered time.Time `json:",omitzero"`
	// Skipped says why the fault was not injected (its target was busy).
	Skipped string `json:",omitempty"`
}

func (f Fault) String() string {
	switch {
	case f.Skipped != "":
		return fmt.Sprintf("+%-6s %-28s skipped: %s", f.Offset.Round(100*time.Millisecond), f.Kind, f.Skipped)
	case f.Start.IsZero():
		return fmt.Sprintf("+%-6s %-28s (not reached)", f.Offset.Round(100*time.Millisecond), f.Kind)
	}
	end := "never healed"
	if !f.End.IsZero() {
		end = "healed " + stamp(f.End)
	}
	recovered := ""
	if !f.Recovered.IsZero() {
		recovered = fmt.Sprintf(", a canary done %s later", f.Recovered.Sub(f.End).Round(100*time.Millisecond))
	}
	return fmt.Sprintf("+%-6s %-28s %-22s %s – %s%s", f.Offset.Round(100*time.Millisecond), f.Kind, f.Target, stamp(f.Start), end, recovered)
}

// faultSpec is one row of the catalogue.
type faultSpec struct {
	kind FaultKind
	// lasts draws how long the fault holds.
	lasts func(r *rand.Rand, t Timing) time.Duration
	// applies says whether the run's environment has what the fault hits.
	applies func(o Options) bool
	// lock is what the fault holds while it lasts: a fault whose lock is
	// held by another is skipped.
	lock func(e *runEnv, pick int) string
	// inject starts the fault and returns its target's name and what heals
	// it; errSkip when there is nothing to hit (no standby, say).
	inject func(ctx context.Context, e *runEnv, pick int) (target string, heal func(context.Context) error, err error)
}

// Timing is the timing the faults are drawn against.
type Timing struct {
	// WorkerLostTimeout is the manager's --worker-lost-timeout.
	WorkerLostTimeout time.Duration
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

func always(Options) bool { return true }

func workerLock(part string) func(e *runEnv, pick int) string {
	return func(e *runEnv, pick int) string { return "worker/" + e.worker(pick).Name + "/" + part }
}

func fixedLock(name string) func(*runEnv, int) string {
	return func(*runEnv, int) string { return name }
}

// catalogue lists every fault kind, in a fixed order (the plan draws from it
// by index, so the order is part of what a seed means).
var catalogue = []faultSpec{
	{kind: LeaderKilled, applies: always, lock: fixedLock("managers"), inject: killManagers(leaderOnly),
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 0, 3*time.Second) }},
	{kind: StandbyKilled, applies: always, lock: fixedLock("managers"), inject: killManagers(standbyOnly),
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 0, 5*time.Second) }},
	{kind: ManagersDown, applies: always, lock: fixedLock("managers"), inject: killManagers(allReplicas),
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 3*time.Second, 15*time.Second) }},
	{kind: WorkerFrozenShort, applies: always, lock: workerLock("apiserver"), inject: freezeAPIServer,
		lasts: func(r *rand.Rand, t Timing) time.Duration { return between(r, time.Second, t.WorkerLostTimeout*3/4) }},
	{kind: WorkerFrozenLong, applies: always, lock: workerLock("apiserver"), inject: freezeAPIServer,
		lasts: func(r *rand.Rand, t Timing) time.Duration {
			return between(r, t.WorkerLostTimeout*3/2, t.WorkerLostTimeout*3)
		}},
	{kind: WorkerEtcdRestarted, applies: always, lock: workerLock("etcd"), inject: restartWorkerComponent("etcd"),
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 0, 4*time.Second) }},
	{kind: ManagerAPIServerRestarted, applies: always, lock: fixedLock("manager/apiserver"), inject: restartManagerAPIServer,
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 0, 4*time.Second) }},
	{kind: CredentialRevoked, applies: always, lock: workerLock("credential"), inject: revokeCredential,
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 3*time.Second, 20*time.Second) }},
	{kind: WebhookUnreachable, applies: always, lock: fixedLock("manager/webhooks"), inject: breakWebhooks,
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 2*time.Second, 10*time.Second) }},
	{kind: WorkerNamespaceDeleted, applies: always, lock: workerLock("namespace"), inject: deleteWorkerNamespace,
		lasts: func(*rand.Rand, Timing) time.Duration { return 0 }},
	// Held past the pod garbage collector's quarantine of pods whose node
	// is gone (40 s, looked at every 20 s): their pods are deleted, and
	// replaced once the nodes are back.
	{kind: NodesLost, applies: func(o Options) bool { return !o.RealNodes }, lock: workerLock("nodes"), inject: loseNodes,
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 45*time.Second, 75*time.Second) }},
	{kind: KueueRestarted, applies: func(o Options) bool { return o.Kueue }, lock: fixedLock("manager/kueue"), inject: restartKueue,
		lasts: func(r *rand.Rand, _ Timing) time.Duration { return between(r, 0, 5*time.Second) }},
}

func specOf(kind FaultKind) *faultSpec {
	for i := range catalogue {
		if catalogue[i].kind == kind {
			return &catalogue[i]
		}
	}
	return nil
}

// Plan draws a run's faults from its seed: kinds uniformly from the
// catalogue's rows that apply, start times with exponential gaps of mean
// meanGap over span, durations from each kind's range. The same seed and
// options give the same plan.
func Plan(seed uint64, o Options, t Timing, span, meanGap time.Duration) []Fault {
	r := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	var rows []faultSpec
	for _, f := range catalogue {
		if f.applies(o) && (len(o.Faults) == 0 || slices.Contains(o.Faults, f.kind)) {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	var plan []Fault
	at := time.Duration(0)
	for {
		at += time.Duration(r.ExpFloat64() * float64(meanGap))
		if at >= span {
			return plan
		}
		f := rows[r.IntN(len(rows))]
		plan = append(plan, Fault{Kind: f.kind, Offset: at, Lasts: f.lasts(r, t), Pick: r.IntN(1 << 16)})
	}
}

// nemesis carries out a plan: each fault at its offset, in its own
// goroutine, so faults overlap; a fault whose target another fault holds,
// or that finds nothing to hit, is skipped and says why.
type nemesis struct {
	env  *runEnv
	out  io.Writer
	plan []Fault
	// canary makes a Job (on the worker; on any when empty) and returns
	// when it finished; zero when it did not within its wait.
	canary func(ctx context.Context, worker string) time.Time
	// abort ends the run (a fault that could not be healed).
	abort func()

	mu    sync.Mutex
	held  map[string]bool
	errs  []error
	heals sync.WaitGroup
	// restarts are the manager replicas the supervisor started again after
	// they exited on their own (a replica that loses its lease exits, and
	// its Deployment would start it again).
	restarts []string
}

// supervise starts again every manager replica that exited while no fault
// holds the replicas, as a Deployment restarts a container, until ctx ends.
func (n *nemesis) supervise(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.mu.Lock()
		var exited []int
		if !n.held["managers"] {
			for i, r := range n.env.Replicas {
				if r.Process.Exited() {
					exited = append(exited, i)
				}
			}
		}
		if len(exited) == 0 {
			n.mu.Unlock()
			continue
		}
		n.held["managers"] = true
		n.mu.Unlock()
		for _, i := range exited {
			name := n.env.Replicas[i].Process.Name
			at := time.Now()
			fmt.Fprintf(n.out, "chaos: %s %s exited on its own; starting it again\n", stamp(at), name)
			attempt, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := n.env.RestartReplica(attempt, i)
			cancel()
			if err != nil {
				// Tried again at the next tick, as a crash loop would.
				fmt.Fprintf(n.out, "chaos: %s starting %s again: %v\n", stamp(time.Now()), name, err)
				continue
			}
			n.mu.Lock()
			n.restarts = append(n.restarts, fmt.Sprintf("%s %s", stamp(at), name))
			n.mu.Unlock()
		}
		n.mu.Lock()
		delete(n.held, "managers")
		n.mu.Unlock()
	}
}

// run starts the plan's faults at their offsets from start and returns
// when the last has started; wait waits for every heal (and canary).
func (n *nemesis) run(ctx context.Context, start time.Time) {
	for i := range n.plan {
		f := &n.plan[i]
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.Offset))):
		}
		n.heals.Add(1)
		go func() {
			defer n.heals.Done()
			n.carryOut(ctx, f)
		}()
	}
}

func (n *nemesis) wait() error {
	n.heals.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	return errors.Join(n.errs...)
}

// faults is the plan as carried out so far.
func (n *nemesis) faults() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Fault(nil), n.plan...)
}

func (n *nemesis) carryOut(ctx context.Context, f *Fault) {
	spec := specOf(f.Kind)
	lock := spec.lock(n.env, f.Pick)
	n.mu.Lock()
	if n.held[lock] {
		f.Skipped = lock + " is held by another fault"
		n.mu.Unlock()
		return
	}
	n.held[lock] = true
	n.mu.Unlock()
	release := func() {
		n.mu.Lock()
		delete(n.held, lock)
		n.mu.Unlock()
	}

	injectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	began := time.Now()
	target, heal, err := spec.inject(injectCtx, n.env, f.Pick)
	cancel()
	if err != nil {
		// Another fault may hold what injecting needs (the manager's API
		// server, say): the fault did not happen.
		n.mu.Lock()
		f.Skipped = err.Error()
		if target != "" {
			f.Skipped = target + ": " + f.Skipped
		}
		n.mu.Unlock()
		release()
		return
	}
	n.mu.Lock()
	f.Target, f.Start = target, began
	n.mu.Unlock()
	fmt.Fprintf(n.out, "chaos: %s %s on %s for %s\n", stamp(f.Start), f.Kind, target, f.Lasts.Round(100*time.Millisecond))

	select {
	case <-ctx.Done():
	case <-time.After(f.Lasts):
	}
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	err = heal(healCtx)
	release()
	if err != nil {
		// The environment is broken: the run is void, and ends now.
		n.mu.Lock()
		n.errs = append(n.errs, fmt.Errorf("healing %s on %s: %w", f.Kind, target, err))
		n.mu.Unlock()
		n.abort()
		return
	}
	end := time.Now()
	n.mu.Lock()
	f.End = end
	n.mu.Unlock()
	fmt.Fprintf(n.out, "chaos: %s %s on %s healed\n", stamp(end), f.Kind, target)
	if ctx.Err() != nil || n.canary == nil {
		return
	}
	worker := ""
	if rest, ok := strings.CutPrefix(lock, "worker/"); ok {
		worker, _, _ = strings.Cut(rest, "/")
	}
	recovered := n.canary(ctx, worker)
	n.mu.Lock()
	f.Recovered = recovered
	n.mu.Unlock()
}

// errNothingToHit: the fault found no target (no standby replica, no
// namespace left to delete).
var errNothingToHit = errors.New("nothing to hit")

// runEnv is what the faults act on.
type runEnv struct {
	*devenv.Env
	namespace     string
	managerClient kubernetes.Interface
	workerClients map[string]kubernetes.Interface
}

func (e *runEnv) worker(pick int) *localcluster.Cluster {
	return e.Workers[pick%len(e.Workers)]
}

type replicaSet int

const (
	leaderOnly replicaSet = iota
	standbyOnly
	allReplicas
)

// killManagers SIGKILLs manager replicas (as an OOM kill or a node loss
// would) and starts them again when healed, as their Deployment would.
func killManagers(which replicaSet) func(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
		var victims []int
		for i, r := range e.Replicas {
			if r.Process.Exited() {
				continue
			}
			leads := devenv.IsLeader(ctx, r.MetricsURL)
			if which == allReplicas || (which == leaderOnly) == leads {
				victims = append(victims, i)
			}
		}
		if len(victims) == 0 {
			return "no " + map[replicaSet]string{leaderOnly: "leader", standbyOnly: "standby"}[which], nil, errNothingToHit
		}
		if which != allReplicas {
			victims = victims[pick%len(victims) : pick%len(victims)+1]
		}
		var names []string
		for _, i := range victims {
			names = append(names, e.Replicas[i].Process.Name)
			if err := syscall.Kill(e.Replicas[i].Process.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return strings.Join(names, ","), nil, err
			}
		}
		return strings.Join(names, ","), func(ctx context.Context) error {
			for _, i := range victims {
				if err := restartReplica(ctx, e, i); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
}

// restartReplica starts manager replica i again until it is ready: a
// replica started while the manager cluster's API server is down (another
// fault) exits, and is started again, as a crash-looping container is.
func restartReplica(ctx context.Context, e *runEnv, i int) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		last = e.RestartReplica(ctx, i)
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}

// freezeAPIServer SIGSTOPs a worker's API server: to the manager the worker
// stops answering, and nothing on the worker can write either.
func freezeAPIServer(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	w := e.worker(pick)
	p, err := w.Component("kube-apiserver")
	if err != nil {
		return w.Name, nil, err
	}
	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		return w.Name, nil, err
	}
	return w.Name, func(context.Context) error { return syscall.Kill(p.PID, syscall.SIGCONT) }, nil
}

// restartWorkerComponent stops one of a worker's processes (SIGTERM) and
// starts it again when healed.
func restartWorkerComponent(component string) func(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
		w := e.worker(pick)
		if err := w.StopComponent(component); err != nil {
			return w.Name, nil, err
		}
		return w.Name, func(context.Context) error {
			_, err := w.RestartComponent(component)
			return err
		}, nil
	}
}

func restartManagerAPIServer(ctx context.Context, e *runEnv, _ int) (string, func(context.Context) error, error) {
	if err := e.Manager.StopComponent("kube-apiserver"); err != nil {
		return "manager", nil, err
	}
	return "manager", func(context.Context) error {
		_, err := e.Manager.RestartComponent("kube-apiserver")
		return err
	}, nil
}

func restartKueue(ctx context.Context, e *runEnv, _ int) (string, func(context.Context) error, error) {
	p, err := e.Manager.Component("kueue")
	if err != nil {
		return "kueue", nil, err
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		return "kueue", nil, err
	}
	return "kueue", func(context.Context) error {
		_, err := e.Manager.RestartComponent("kueue")
		return err
	}, nil
}

// revokeCredential replaces a worker's kubeconfig Secret with one whose
// credential the worker refuses (a token it never issued), and puts the
// original back when healed.
func revokeCredential(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	w := e.worker(pick)
	secrets := e.managerClient.CoreV1().Secrets(devenv.SystemNamespace)
	name := w.Name + "-kubeconfig"
	secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return w.Name, nil, err
	}
	original := secret.DeepCopy()
	config, err := clientcmd.Load(secret.Data[v1alpha1.DefaultKubeConfigKey])
	if err != nil {
		return w.Name, nil, err
	}
	for _, auth := range config.AuthInfos {
		auth.ClientCertificateData, auth.ClientKeyData, auth.ClientCertificate, auth.ClientKey = nil, nil, "", ""
		auth.Token = "revoked-by-the-chaos-run"
	}
	revoked, err := clientcmd.Write(*config)
	if err != nil {
		return w.Name, nil, err
	}
	secret.Data[v1alpha1.DefaultKubeConfigKey] = revoked
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		return w.Name, nil, err
	}
	return w.Name, func(ctx context.Context) error {
		return retryOnAPIErrors(ctx, func(ctx context.Context) error {
			now, err := secrets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now.Data = original.Data
			_, err = secrets.Update(ctx, now, metav1.UpdateOptions{})
			return err
		})
	}, nil
}

// breakWebhooks points the manager's webhooks at a port nothing listens on
// (as a NetworkPolicy or a firewall change would cut them off), and back
// when healed.
func breakWebhooks(ctx context.Context, e *runEnv, _ int) (string, func(context.Context) error, error) {
	ar := e.managerClient.AdmissionregistrationV1()
	// set points every webhook of jobferry's configurations at url(its
	// current URL) and returns the URLs it replaced, by configuration and
	// webhook.
	set := func(ctx context.Context, url func(key string, was *string) *string) (map[string]*string, error) {
		replaced := map[string]*string{}
		ms, err := ar.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range ms.Items {
			for i := range c.Webhooks {
				key := "mutating/" + c.Name + "/" + c.Webhooks[i].Name
				replaced[key] = c.Webhooks[i].ClientConfig.URL
				c.Webhooks[i].ClientConfig.URL = url(key, c.Webhooks[i].ClientConfig.URL)
			}
			if _, err := ar.MutatingWebhookConfigurations().Update(ctx, &c, metav1.UpdateOptions{}); err != nil {
				return replaced, err
			}
		}
		vs, err := ar.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return replaced, err
		}
		for _, c := range vs.Items {
			for i := range c.Webhooks {
				key := "validating/" + c.Name + "/" + c.Webhooks[i].Name
				replaced[key] = c.Webhooks[i].ClientConfig.URL
				c.Webhooks[i].ClientConfig.URL = url(key, c.Webhooks[i].ClientConfig.URL)
			}
			if _, err := ar.ValidatingWebhookConfigurations().Update(ctx, &c, metav1.UpdateOptions{}); err != nil {
				return replaced, err
			}
		}
		return replaced, nil
	}
	nowhere := "https://127.0.0.1:1/unreachable"
	original, err := set(ctx, func(_ string, was *string) *string {
		if was == nil {
			return nil // a Service reference: not one of ours here
		}
		return &nowhere
	})
	restore := func(ctx context.Context) error {
		return retryOnAPIErrors(ctx, func(ctx context.Context) error {
			_, err := set(ctx, func(key string, was *string) *string {
				if u, ok := original[key]; ok {
					return u
				}
				return was
			})
			return err
		})
	}
	if err != nil {
		// Some configurations may be broken already: mended at once.
		restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return "webhooks", nil, errors.Join(err, restore(restoreCtx))
	}
	return fmt.Sprintf("%d webhooks", len(original)), restore, nil
}

// deleteWorkerNamespace deletes the run's namespace on a worker, with every
// mirror and pod in it (as a worker's administrator cleaning up would).
func deleteWorkerNamespace(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	w := e.worker(pick)
	c := e.workerClients[w.Name]
	err := c.CoreV1().Namespaces().Delete(ctx, e.namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return w.Name, nil, errNothingToHit
	}
	if err != nil {
		return w.Name, nil, err
	}
	return w.Name + "/" + e.namespace, func(ctx context.Context) error {
		// Healed once gone: jobferry makes it again for the next mirror.
		return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			ns, err := c.CoreV1().Namespaces().Get(ctx, e.namespace, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp == nil), nil
		})
	}, nil
}

// loseNodes deletes a worker's KWOK nodes (their pods are left without a
// node, and the pod garbage collector deletes them), and registers them
// again when healed.
func loseNodes(ctx context.Context, e *runEnv, pick int) (string, func(context.Context) error, error) {
	w := e.worker(pick)
	c := e.workerClients[w.Name]
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return w.Name, nil, err
	}
	var lost []corev1.Node
	for _, n := range nodes.Items {
		if err := c.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return w.Name, nil, err
		}
		lost = append(lost, n)
	}
	return fmt.Sprintf("%s (%d nodes)", w.Name, len(lost)), func(ctx context.Context) error {
		for _, n := range lost {
			fresh := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations},
				Spec:       corev1.NodeSpec{Taints: n.Spec.Taints},
				Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity},
			}
			err := retryOnAPIErrors(ctx, func(ctx context.Context) error {
				_, err := c.CoreV1().Nodes().Create(ctx, fresh, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// retryOnAPIErrors retries f every half second until it succeeds or ctx
// ends (other faults may hold the API server it writes to).
func retryOnAPIErrors(ctx context.Context, f func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last = f(attempt)
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}
