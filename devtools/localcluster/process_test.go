package localcluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startTestProcess runs a program as a component; a foreign-process check
// compares /proc's argv[0] with the binary, so tests that use it must start
// the program itself, not a shell that execs it.
func startTestProcess(t *testing.T, program string, args ...string) *Process {
	t.Helper()
	return startPinnedTestProcess(t, "", program, args...)
}

// startPinnedTestProcess is startTestProcess pinned to cpus (unpinned when empty).
func startPinnedTestProcess(t *testing.T, cpus, program string, args ...string) *Process {
	t.Helper()
	binary, err := exec.LookPath(program)
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProcess("test", binary, args, filepath.Join(t.TempDir(), "test.log"), false, cpus, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	// Between fork and exec, /proc still shows the test binary's argv.
	deadline := time.Now().Add(5 * time.Second)
	for !p.isRunningForeign() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start", program)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return p
}

func TestPinnedProcessRunsOnItsCPUsOnly(t *testing.T) {
	p := startPinnedTestProcess(t, "0", "sleep", "600")
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "status"))
	if err != nil {
		t.Fatal(err)
	}
	var allowed string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			allowed = strings.TrimSpace(v)
		}
	}
	if allowed != "0" {
		t.Errorf("pinned to CPU 0, but /proc says it may run on %q", allowed)
	}
	if p.CPUs != "0" {
		t.Errorf("the process record says CPUs %q, want 0 (a restart pins it again)", p.CPUs)
	}
}

func TestStopEndsAProcessThatHonoursSIGTERM(t *testing.T) {
	p := startTestProcess(t, "sleep", "600")
	if p.Exited() {
		t.Fatal("process exited before Stop")
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Error("process still running after Stop")
	}
}

func TestStopKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	old := stopTimeout
	stopTimeout = 200 * time.Millisecond
	t.Cleanup(func() { stopTimeout = old })

	p := startTestProcess(t, "bash", "-c", "trap '' TERM; while :; do sleep 0.05; done")
	waitForLoop(t, p)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Error("process still running after Stop")
	}
}

// A process read back from a state file is checked through /proc: it runs
// only while its PID exists and still runs the recorded binary.
func TestForeignProcessIsCheckedByPIDAndBinary(t *testing.T) {
	p := startTestProcess(t, "sleep", "600")
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var foreign, reused Process
	if err := json.Unmarshal(data, &foreign); err != nil {
		t.Fatal(err)
	}
	if foreign.Exited() {
		t.Fatal("recorded process reported as exited while it runs")
	}
	reused = foreign
	reused.Binary = "/not/the/recorded/binary"
	if !reused.Exited() {
		t.Error("a PID running another binary is reported as the recorded process")
	}
	if err := foreign.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.waitExit(5 * time.Second) {
		t.Error("Stop through the recorded PID did not end the process")
	}
}

// waitForLoop returns once bash has a child sleep: by then it has installed
// its trap, so the SIGTERM that Stop sends is really ignored.
func waitForLoop(t *testing.T, p *Process) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if out, _ := exec.Command("pgrep", "-P", strconv.Itoa(p.PID), "sleep").Output(); len(out) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("test process did not start its loop")
}

// A component started with extra environment runs with it, as the process
// the record names, and keeps it when restarted.
func TestComponentWithEnvRunsWithItAndKeepsItOnRestart(t *testing.T) {
	c := &Cluster{Name: "test", Dir: t.TempDir()}
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	environOf := func(p *Process) string {
		t.Helper()
		// Between fork and exec, /proc shows the test binary's environment.
		deadline := time.Now().Add(5 * time.Second)
		for !p.isRunningForeign() {
			if time.Now().After(deadline) {
				t.Fatal("sleep did not start")
			}
			time.Sleep(5 * time.Millisecond)
		}
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		if err != nil {
			t.Fatal(err)
		}
		return string(environ)
	}
	p, err := c.StartComponentWithEnv("sleeper", []string{"GOMEMLIMIT=900MiB"}, sleep, "600")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if env := environOf(p); !strings.Contains(env, "GOMEMLIMIT=900MiB\x00") {
		t.Fatalf("the component's environment lacks GOMEMLIMIT=900MiB")
	}
	restarted, err := c.RestartComponent("sleeper")
	if err != nil {
		t.Fatal(err)
	}
	if env := environOf(restarted); !strings.Contains(env, "GOMEMLIMIT=900MiB\x00") {
		t.Fatalf("the restarted component's environment lacks GOMEMLIMIT=900MiB")
	}
}
