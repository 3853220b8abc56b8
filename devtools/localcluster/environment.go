package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sync/errgroup"
)

// EnvironmentSpec is a manager cluster and its workers.
type EnvironmentSpec struct {
	Manager Spec
	Workers []Spec
	// FollowedLogs is how many pod logs its users will follow at once on
	// KWOK's nodes: KWOK holds an inotify instance for each followed log
	// (the kubelet's CRI log reader watches the file), and one it cannot
	// open ends that log after its first lines.
	FollowedLogs int
}

// EnvironmentOptions say where and how an environment runs.
type EnvironmentOptions struct {
	// Dir holds one sub-directory per cluster and the shared CA.
	Dir      string
	BinDir   string
	Detached bool
	Progress io.Writer
	// NodeImages are OCI archives every real node imports (Options.NodeImages).
	NodeImages []string
	// Registry starts a local OCI registry (Registry) with the manager, on
	// the real nodes' network, which every real node trusts.
	Registry bool
}

// Environment is a running manager cluster and its workers, sharing one CA.
type Environment struct {
	Dir     string
	CA      *CA
	Manager *Cluster
	Workers []*Cluster
	// Network is the host network of the real nodes; nil without any.
	Network *HostNetwork
	// Registry is the local registry (EnvironmentOptions.Registry); nil
	// without one.
	Registry *Registry
}

// Clusters lists the manager first, then the workers.
func (e *Environment) Clusters() []*Cluster {
	out := []*Cluster{}
	if e.Manager != nil {
		out = append(out, e.Manager)
	}
	return append(out, e.Workers...)
}

// checkEtcdOf: every Spec.EtcdOf names another cluster of specs that runs
// its own etcd.
func checkEtcdOf(specs []Spec) error {
	owners := map[string]bool{}
	for _, s := range specs {
		if s.EtcdOf == "" {
			owners[s.Name] = true
		}
	}
	for _, s := range specs {
		if s.EtcdOf != "" && !owners[s.EtcdOf] {
			return fmt.Errorf("cluster %s: EtcdOf %q names no cluster of the environment that runs its own etcd", s.Name, s.EtcdOf)
		}
	}
	return nil
}

// Stop stops every cluster of the environment, those using another's etcd
// (Spec.EtcdOf) before the one running it.
func (e *Environment) Stop() error {
	var errs []error
	for _, sharing := range []bool{true, false} {
		for _, c := range e.Clusters() {
			if c == nil || (c.etcdOf != "") != sharing {
				continue
			}
			if err := c.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := removeHostNetwork(e.Dir); err != nil {
		errs = append(errs, err)
	}
	untrackNetwork(e.Dir)
	return errors.Join(errs...)
}

// Release leaves a detached environment running after this program exits.
func (e *Environment) Release() {
	for _, c := range e.Clusters() {
		c.Release()
	}
	untrackNetwork(e.Dir)
}

// sharingStarts bounds how many clusters using another's etcd start at once:
// fifty API servers starting together on one CPU miss every deadline.
const sharingStarts = 4

// StartEnvironment starts the manager and every worker concurrently; then,
// a few at a time, the clusters using the etcd of one of those (Spec.EtcdOf).
func StartEnvironment(ctx context.Context, spec EnvironmentSpec, opts EnvironmentOptions) (*Environment, error) {
	if opts.Dir == "" {
		return nil, errors.New("EnvironmentOptions.Dir is required")
	}
	specs := append([]Spec{spec.Manager}, spec.Workers...)
	if err := checkEtcdOf(specs); err != nil {
		return nil, err
	}
	if err := checkInotify(spec, opts.Progress); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := NewCA("jobferry-local-ca")
	if err != nil {
		return nil, err
	}
	if err := ca.WriteFiles(opts.Dir); err != nil {
		return nil, err
	}
	env := &Environment{Dir: opts.Dir, CA: ca, Workers: make([]*Cluster, len(spec.Workers))}
	for _, s := range specs {
		if s.RealNode && env.Network == nil {
			// Like its clusters, tracked while starting even when
			// detached (Release forgets it).
			trackNetwork(opts.Dir)
			if env.Network, err = newHostNetwork(opts.Dir); err != nil {
				return nil, errors.Join(err, removeHostNetwork(opts.Dir))
			}
		}
	}
	started := make([]*Cluster, len(specs))
	startPhase := func(sharing bool, limit int) error {
		etcdOf := map[string]string{}
		for _, c := range started {
			if c != nil {
				etcdOf[c.Name] = c.EtcdURL
			}
		}
		group, gctx := errgroup.WithContext(ctx)
		group.SetLimit(limit)
		for i, s := range specs {
			if (s.EtcdOf != "") != sharing {
				continue
			}
			etcd := etcdOf[s.EtcdOf] // checkEtcdOf: started in the first phase
			group.Go(func() error {
				c, err := Start(gctx, s, Options{
					Dir: filepath.Join(opts.Dir, s.Name), BinDir: opts.BinDir, CA: ca,
					Detached: opts.Detached, Progress: opts.Progress, Etcd: etcd,
					Network: env.Network, NodeSlot: i, NodeImages: opts.NodeImages,
				})
				started[i] = c
				return err
			})
		}
		return group.Wait()
	}
	err = startPhase(false, -1)
	if err == nil {
		err = startPhase(true, sharingStarts)
	}
	env.Manager = started[0]
	copy(env.Workers, started[1:])
	if err == nil && opts.Registry {
		err = env.startRegistry(ctx, opts.BinDir)
	}
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return env, nil
}

// startRegistry runs the environment's registry with the manager, where
// every real node reaches it (the host's address on their network), and
// makes each real node trust it.
func (e *Environment) startRegistry(ctx context.Context, binDir string) error {
	if e.Network == nil {
		return errors.New("a local registry serves real nodes: the environment has none")
	}
	r, err := e.Manager.StartRegistry(ctx, binDir, filepath.Join(e.Dir, "registry"), e.Network.HostIP())
	if err != nil {
		return fmt.Errorf("the local registry: %w", err)
	}
	e.Registry = r
	for _, c := range e.Clusters() {
		if _, err := os.Stat(nodeFile(c.Dir)); err == nil {
			if err := c.TrustRegistry(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunningCluster is a cluster of a detached environment, read back from disk.
type RunningCluster struct {
	Name           string
	KubeconfigPath string
	Processes      []*Process
}

// Running reports whether any process of the cluster is still alive.
func (r RunningCluster) Running() bool {
	for _, p := range r.Processes {
		if !p.Exited() {
			return true
		}
	}
	return false
}

// LoadEnvironment reads what a (detached) environment in dir left on disk.
func LoadEnvironment(dir string) ([]RunningCluster, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "processes.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []RunningCluster
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var procs []*Process
		if err := json.Unmarshal(data, &procs); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		clusterDir := filepath.Dir(f)
		out = append(out, RunningCluster{
			Name:           filepath.Base(clusterDir),
			KubeconfigPath: filepath.Join(clusterDir, "kubeconfig"),
			Processes:      procs,
		})
	}
	return out, nil
}

// StopEnvironment stops every process recorded under dir, each cluster in
// reverse start order, and removes the records of what it stopped.
func StopEnvironment(dir string) (stopped int, err error) {
	clusters, err := LoadEnvironment(dir)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, c := range clusters {
		if err := stopAll(c.Processes); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
			continue
		}
		stopped++
		_ = os.Remove(processesFile(filepath.Join(dir, c.Name)))
	}
	// Real nodes: what their processes leave (containers, mounts, cgroups,
	// routes), also of a cluster whose processes were never recorded.
	nodes, err := filepath.Glob(filepath.Join(dir, "*", "node.json"))
	if err != nil {
		return stopped, err
	}
	for _, n := range nodes {
		if err := stopRealNode(filepath.Dir(n)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeHostNetwork(dir); err != nil {
		errs = append(errs, err)
	}
	return stopped, errors.Join(errs...)
}
