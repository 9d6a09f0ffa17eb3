package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOWithoutWriterHonoursSignals: `luacoll run f` on a FIFO that no
// process opens for writing blocks in open; SIGINT and SIGTERM still end
// it, with 130 and 143, saying it was reading the script.
func TestFIFOWithoutWriterHonoursSignals(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "script.lua")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		cmd := exec.Command(bin, "run", "-n", "2", fifo)
		cmd.Env = cleanEnv()
		var e syncBuffer
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Long enough for the launcher to reach the open.
		time.Sleep(300 * time.Millisecond)
		_ = cmd.Process.Signal(tc.sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%v: still running 5 s after the signal", tc.sig)
		}
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != tc.code || !strings.Contains(e.String(), "reading the script from "+fifo) {
			t.Fatalf("%v: exit %v, want %d\n%s", tc.sig, err, tc.code, e.String())
		}
	}
}

// TestInterruptStopsLongReplays: Ctrl-C on a job whose ranks replay a
// plan a billion times stops every rank at once, not after the
// launcher's grace.
func TestInterruptStopsLongReplays(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local b = lc.buffer(8)
local nx = (lc.rank + 1) % lc.size
local p = lc.plan(function(w)
  w:put_signal(nx, 0, b, 0, 8, 0)
  w:wait_signal(0, ">=", 1)
end, w)
print("started")
p:run{ times = 1e9 }
w:sync()`)
	cmd, e := startTwoRanks(t, s)
	start := time.Now()
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, e.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to stop\n%s", d, e.String())
	}
	checkClean(t, before)
}

// TestNodesJobLeavesNothing: a --nodes job whose output pipe closes after
// its first line (| head -1) still removes its nodes' directories; one
// whose launcher is killed with SIGKILL leaves them, and `luacoll clean`
// finds and removes them.
func TestNodesJobLeavesNothing(t *testing.T) {
	before := append(tmpLeftovers(), shmNodeDirs()...)
	loud := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
for i = 1, 20000 do print("line", i) end
w:free()`)
	cmd := exec.Command(bin, "run", "-n", "2", "--nodes", "2", loud)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	out.Close()
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Errorf("the launcher was killed by %v", ws.Signal())
	}
	if left := newNames(before, append(tmpLeftovers(), shmNodeDirs()...)); len(left) > 0 {
		t.Fatalf("left behind after the pipe closed: %v", left)
	}

	slow := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
print("started")
local t = lc.now(); while lc.now() - t < 60 do end`)
	cmd = exec.Command(bin, "run", "-n", "2", "--nodes", "2", slow)
	cmd.Env = cleanEnv()
	var o syncBuffer
	cmd.Stdout = &o
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(o.String(), "started") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	left := newNames(before, append(tmpLeftovers(), shmNodeDirs()...))
	if len(left) != 4 {
		t.Fatalf("after SIGKILL: %v, want the 4 directories of 2 nodes", left)
	}
	// The ranks die with the launcher (at once, but not in this instant).
	time.Sleep(200 * time.Millisecond)
	r := luacoll(t, nil, "clean")
	for _, name := range left {
		if !strings.Contains(r.stdout, "removed ") || !strings.Contains(r.stdout, name+" (node directory, unused)") {
			t.Errorf("clean did not remove %s:\n%s%s", name, r.stdout, r.stderr)
		}
	}
	if left := newNames(before, append(tmpLeftovers(), shmNodeDirs()...)); len(left) > 0 {
		t.Fatalf("left behind after clean: %v", left)
	}
}

// shmNodeDirs lists the logical nodes' directories in /dev/shm.
func shmNodeDirs() []string {
	return namesIn("/dev/shm", func(n string) bool { return strings.HasPrefix(n, "luacoll-") && strings.Contains(n, "-node") })
}

// newNames is what now holds beyond before.
func newNames(before, now []string) []string {
	seen := setOf(before)
	var out []string
	for _, n := range now {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}

// TestPlanStopScript runs tests/plan_stop.lua (also a GPU suite step, in
// every plan mode) on the host.
func TestPlanStopScript(t *testing.T) {
	r := luacoll(t, nil, "run", "-n", "2", "tests/plan_stop.lua")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] plan_stop: 1 passed, 0 failed") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
