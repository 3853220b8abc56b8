package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout is how long a component gets to exit after SIGTERM before it is
// killed: an apiserver whose etcd is gone can hang on SIGTERM for minutes.
var stopTimeout = 5 * time.Second

// Process is one running component, as recorded in the environment state file.
type Process struct {
	Name   string   `json:"name"`
	Binary string   `json:"binary"`
	Args   []string `json:"args"`
	PID    int      `json:"pid"`
	Log    string   `json:"log"`
	// CPUs the process is pinned to (a taskset list); empty when not pinned.
	CPUs string `json:"cpus,omitempty"`
	// Launcher is the command that sets the process up and execs Binary
	// with Args in the same process (unshare and sh, say); empty when Binary
	// is started directly.
	Launcher []string `json:"launcher,omitempty"`

	// exited is closed once the process has been reaped; nil when the process
	// was started by another program (read back from a state file).
	exited chan struct{}
	// exitErr is the result of Wait, valid once exited is closed.
	exitErr error
}

// startProcess starts binary with its output in logPath, pinned to cpus (a
// taskset list) when set: taskset sets the affinity and execs the binary in
// the same process, so every thread the binary creates inherits it and the
// PID and argv[0] are the binary's. Unless detached, the
// kernel kills it if the starting process dies (Pdeathsig). Every component
// gets its own process group so a terminal's Ctrl-C reaches only the starting
// process, which then stops the components in order.
func startProcess(name, binary string, args []string, logPath string, detached bool, cpus string, launcher []string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	argv := append(append(append([]string(nil), launcher...), binary), args...)
	if cpus != "" {
		argv = append([]string{"taskset", "--cpu-list", cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detached {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	fmt.Fprintf(logFile, "# %s %s\n", binary, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Binary: binary, Args: args, PID: cmd.Process.Pid, Log: logPath, CPUs: cpus, Launcher: launcher, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	return !p.isRunningForeign()
}

// isRunningForeign checks a process started by another program: it must
// exist, not be a zombie, and still run the recorded binary (PIDs are reused).
func (p *Process) isRunningForeign() bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "cmdline"))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == p.Binary
}

// Stop sends SIGTERM, waits up to stopTimeout, then sends SIGKILL and waits
// for the process to be gone.
func (p *Process) Stop() error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.waitExit(stopTimeout) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.waitExit(stopTimeout) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.PID)
}

func (p *Process) waitExit(timeout time.Duration) bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return true
		case <-time.After(timeout):
			return false
		}
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !p.isRunningForeign() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// stopAll stops processes in reverse start order, collecting every error.
func stopAll(procs []*Process) error {
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// live holds what this process must stop when it is interrupted.
var live = struct {
	sync.Mutex
	stoppers map[*Cluster]struct{}
	// networks are the directories of environments whose host network
	// is removed once their clusters are stopped.
	networks map[string]struct{}
	once     sync.Once
	// interrupted is closed when a signal's handling starts; the handler
	// ends the process.
	interrupted chan struct{}
}{stoppers: map[*Cluster]struct{}{}, networks: map[string]struct{}{}, interrupted: make(chan struct{})}

// AwaitInterrupt blocks for good if this process is handling SIGINT or
// SIGTERM (the handler stops every cluster and then exits the process), and
// returns at once otherwise: a program whose start failed because the
// interrupt stopped its clusters calls it before exiting, so its own exit
// does not cut the clean-up short.
func AwaitInterrupt() {
	select {
	case <-live.interrupted:
		select {}
	default:
	}
}

// track arranges for c to be stopped if this process gets SIGINT or SIGTERM.
func track(c *Cluster) {
	live.Lock()
	live.stoppers[c] = struct{}{}
	live.Unlock()
	handleSignals()
}

// trackNetwork arranges for the host network of the environment in envDir
// to be removed, after its clusters are stopped, if this process gets
// SIGINT or SIGTERM.
func trackNetwork(envDir string) {
	live.Lock()
	live.networks[envDir] = struct{}{}
	live.Unlock()
	handleSignals()
}

func untrackNetwork(envDir string) {
	live.Lock()
	delete(live.networks, envDir)
	live.Unlock()
}

func handleSignals() {
	live.once.Do(func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-signals
			close(live.interrupted)
			live.Lock()
			clusters := make([]*Cluster, 0, len(live.stoppers))
			for c := range live.stoppers {
				clusters = append(clusters, c)
			}
			live.Unlock()
			fmt.Fprintf(os.Stderr, "localcluster: %v: stopping %d local cluster(s)\n", sig, len(clusters))
			var wg sync.WaitGroup
			for _, c := range clusters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := c.Stop(); err != nil {
						fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
					}
				}()
			}
			wg.Wait()
			live.Lock()
			networks := make([]string, 0, len(live.networks))
			for dir := range live.networks {
				networks = append(networks, dir)
			}
			live.Unlock()
			for _, dir := range networks {
				if err := removeHostNetwork(dir); err != nil {
					fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
				}
			}
			os.Exit(128 + int(sig.(syscall.Signal)))
		}()
	})
}

func untrack(c *Cluster) {
	live.Lock()
	delete(live.stoppers, c)
	live.Unlock()
}
