//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// helperEnv makes the test binary start a cluster, print its processes as one
// JSON line on stdout and block, instead of running tests.
const helperEnv = "JOBFERRY_E2E_CLUSTER_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		runClusterHelper(dir)
		return
	}
	code := m.Run()
	stopSharedEnv()
	os.Exit(code)
}

func runClusterHelper(dir string) {
	spec := localcluster.Spec{Name: "interrupted", Pools: []localcluster.Pool{{Name: "general", Nodes: 1}}}
	c, err := localcluster.Start(context.Background(), spec, localcluster.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(c.Processes); err != nil {
		os.Exit(1)
	}
	select {} // until a signal arrives
}

// Whatever stops a run that has clusters up — Ctrl-C, a CI runner's SIGTERM,
// or a SIGKILL that allows no clean-up at all — no control-plane process
// outlives it.
func TestInterruptedRunLeavesNoProcesses(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{
		"SIGINT":  syscall.SIGINT,
		"SIGTERM": syscall.SIGTERM,
		"SIGKILL": syscall.SIGKILL,
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(outputDir(t), "interrupted")
			helper := exec.Command(os.Args[0], "-test.run=^$")
			helper.Env = append(os.Environ(), helperEnv+"="+dir)
			helper.Stderr = os.Stderr
			stdout, err := helper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = helper.Process.Kill() })

			var procs []*localcluster.Process
			line, err := bufio.NewReader(stdout).ReadBytes('\n')
			if err != nil {
				t.Fatalf("helper printed no process list: %v", err)
			}
			if err := json.Unmarshal(line, &procs); err != nil {
				t.Fatalf("helper printed %q: %v", line, err)
			}
			if len(procs) != 5 {
				t.Fatalf("helper started %d processes, want etcd, apiserver, controller-manager, scheduler and KWOK", len(procs))
			}
			for _, p := range procs {
				if p.Exited() {
					t.Fatalf("%s (pid %d) is not running before the signal", p.Name, p.PID)
				}
			}

			if err := helper.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = helper.Wait()
			err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				for _, p := range procs {
					if !p.Exited() {
						return false, nil
					}
				}
				return true, nil
			})
			for _, p := range procs {
				if !p.Exited() {
					t.Errorf("%s (pid %d) still running after %s to its starter", p.Name, p.PID, name)
					_ = p.Stop()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
