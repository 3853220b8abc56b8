package localcluster

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func startTestProcess(t *testing.T, script string) *Process {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProcess("test", bash, []string{"-c", script}, filepath.Join(t.TempDir(), "test.log"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

func TestStopEndsAProcessThatHonoursSIGTERM(t *testing.T) {
	p := startTestProcess(t, "exec sleep 600")
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

	p := startTestProcess(t, "trap '' TERM; while :; do sleep 0.05; done")
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
	p := startTestProcess(t, "exec sleep 600")
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
