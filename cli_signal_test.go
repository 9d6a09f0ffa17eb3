package main

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLauncherSignalsExit: SIGTERM, and SIGHUP (its terminal or ssh
// session closed), to the launcher stop the ranks and exit 128 + the
// signal, as SIGINT exits 130, leaving nothing behind.
func TestLauncherSignalsExit(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		says string
	}{{syscall.SIGTERM, 143, "interrupted (terminated"}, {syscall.SIGHUP, 129, "interrupted (hangup"}} {
		if c.sig == syscall.SIGHUP && signal.Ignored(syscall.SIGHUP) {
			// Started under nohup: the launcher inherits SIGHUP ignored.
			t.Log("SIGHUP is ignored in this process (nohup?): its case is left out")
			continue
		}
		before := shmLeftovers(t)
		cmd, e := startTwoRanks(t, writeScript(t, waitingScript))
		_ = cmd.Process.Signal(c.sig)
		waitExit(t, cmd, e, c.code, c.says)
		checkClean(t, before)
	}
}

// TestSecondInterruptKillsAtOnce: a rank that cannot stop on SIGINT (it
// waits for a child that ignores it) would hold the job for the grace
// (--timeout + 5 s, 65 s here); a second SIGINT kills every rank at once.
func TestSecondInterruptKillsAtOnce(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `print("started")
os.execute("trap '' INT; sleep 93.1")`)
	cmd, e := startTwoRanks(t, s)
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitExit(t, cmd, e, 130, "interrupted again: killing every rank now")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v after the first SIGINT: the second did not cut the grace short", took)
	}
	checkGone(t, "sleep 93.1")
	checkClean(t, before)
}

// TestStoppedRankKilledAfterInterrupt: after Ctrl-C a stopped rank (which
// cannot act on SIGINT) is killed at once, not after the grace.
func TestStoppedRankKilledAfterInterrupt(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, strings.Replace(waitingScript, `print("started")`,
		`print("started")
if lc.rank == 1 then os.execute("kill -STOP $PPID") end`, 1))
	cmd, e := startTwoRanks(t, s)
	time.Sleep(300 * time.Millisecond) // rank 1 stops itself
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitExit(t, cmd, e, 130, "rank 1 is stopped")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v: the launcher waited out its grace for the stopped rank", took)
	}
	checkClean(t, before)
}

// TestRanksChildrenDoNotOutliveTheJob: what a rank started and left
// running (os.execute with &) is killed when the job ends.
func TestRanksChildrenDoNotOutliveTheJob(t *testing.T) {
	s := writeScript(t, `os.execute("sleep 92.7 &")`)
	r := luacoll(t, nil, "run", "-n", "2", s)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkGone(t, "sleep 92.7")
}

// waitExit waits for the launcher cmd and fails the test unless it exited
// with code and its stderr (e) says says.
func waitExit(t *testing.T, cmd *exec.Cmd, e *syncBuffer, code int, says string) {
	t.Helper()
	err := cmd.Wait()
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != code || !strings.Contains(e.String(), says) {
		t.Fatalf("exit %v, want %d and %q; its stderr:\n%s\n(exit %v, want %d; the first lines of its stderr:)\n%s",
			err, code, says, e.String(), err, code, firstLines(e.String(), 12))
	}
}

// firstLines is the first n lines of s: after a long output (a Go stack
// dump) they say what happened where only the tail of a log is shown.
func firstLines(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "")
}

// checkGone fails the test when a process whose command line is cmdline
// is still running, a moment after the job ended (and kills it).
func checkGone(t *testing.T, cmdline string) {
	t.Helper()
	var left []string
	for range 50 {
		left = processesRunning(cmdline)
		if len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%q outlived the job: pids %v", cmdline, left)
	for _, pid := range left {
		_ = exec.Command("kill", "-9", pid).Run()
	}
}

// processesRunning are the pids whose command line (arguments joined by
// spaces) is cmdline, from /proc.
func processesRunning(cmdline string) []string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")) == cmdline {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestInterruptBenchAndCheck: Ctrl-C stops a bench whose ranks sit in
// window waits (a ping-pong, barriers) and a check whose ranks wait or
// spin at once, with 130, not after the timeout's grace and not as a
// failure (exit 1). The signal comes once the job is under way (the
// bench's two rank processes started, each check rank said "started"),
// whatever the machine's load.
func TestInterruptBenchAndCheck(t *testing.T) {
	spin := writeScript(t, "print(\"started\")\nwhile true do end\n")
	wait := writeScript(t, waitingScript)
	for _, c := range []struct {
		args    []string
		started int // check: ranks that say "started"; bench: 0
	}{
		{[]string{"bench", "pingpong", "-n", "2", "--iters", "100000000", "--timeout", "60s"}, 0},
		{[]string{"bench", "barrier", "-n", "2", "--iters", "100000000", "--timeout", "60s"}, 0},
		{[]string{"check", "-n", "2", "--timeout", "60s", spin}, 2},
		{[]string{"check", "-n", "2", "--timeout", "60s", wait}, 2},
	} {
		before := shmLeftovers(t)
		cmd, o, e := startRunSaying(t, "started", c.started, c.args...)
		under := strings.Count(o.String(), "started") >= c.started
		if c.started == 0 {
			// A bench prints its table at the end: wait for its ranks,
			// then give them time to open their comm and start measuring.
			under = waitChildren(cmd.Process.Pid, 2, 60*time.Second)
			time.Sleep(1500 * time.Millisecond)
		}
		if !under {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("%v: not under way after 60 s\n%s\n%s", c.args, o.String(), e.String())
		}
		time.Sleep(200 * time.Millisecond) // into the waits, the loop
		start := time.Now()
		_ = cmd.Process.Signal(syscall.SIGINT)
		waitExit(t, cmd, e, 130, "interrupted")
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%v: took %v to stop after SIGINT", c.args, took)
		}
		checkClean(t, before)
	}
}

// waitChildren waits (up to limit) until the process pid has n children,
// and says whether it had.
func waitChildren(pid, n int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		// Each thread lists the children it started.
		files, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
		kids := 0
		for _, f := range files {
			b, _ := os.ReadFile(f)
			kids += len(strings.Fields(string(b)))
		}
		if kids >= n {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestReplSignalsExit: SIGTERM and SIGHUP end a REPL session as :quit
// does, and its exit status says so (128 + the signal), as run's does.
func TestReplSignalsExit(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		if c.sig == syscall.SIGHUP && signal.Ignored(syscall.SIGHUP) {
			t.Log("SIGHUP is ignored in this process (nohup?): its case is left out")
			continue
		}
		before := shmLeftovers(t)
		cmd := exec.Command(bin, "repl", "-n", "2")
		cmd.Env = cleanEnv()
		var o, e syncBuffer
		cmd.Stdout, cmd.Stderr = &o, &e
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _ = in.Write([]byte("print('started')\n"))
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(o.String(), "started") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = cmd.Process.Signal(c.sig)
		err = cmd.Wait()
		_ = in.Close()
		if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != c.code {
			t.Errorf("%v: exit %v, want %d\n%s\n%s", c.sig, err, c.code, o.String(), e.String())
		}
		checkClean(t, before)
	}
}

// TestClosedOutputStopsTheJob: once nobody reads the output (`luacoll run
// ... | head -1`), the job stops as a command stops on SIGPIPE (exit 141)
// rather than running to its end with the output dropped.
func TestClosedOutputStopsTheJob(t *testing.T) {
	before := shmLeftovers(t)
	s := writeScript(t, `
local w = lc.window{ bytes = 64 }
for i = 1, 1e9 do print(i) end
w:barrier(); w:sync()
`)
	cmd := exec.Command(bin, "run", "-n", "2", s)
	cmd.Env = cleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var e syncBuffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	_ = out.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 30 s after its output closed\n%s", e.String())
	}
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != 141 || !strings.Contains(e.String(), "broken pipe") {
		t.Errorf("exit %v, want 141\n%s", err, e.String())
	}
	checkClean(t, before)
}
