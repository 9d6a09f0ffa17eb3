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
