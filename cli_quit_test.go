package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGQUIT to a bench's launcher makes every rank say which benchmark and
// size it was measuring and the wait it was in; the Go stacks go to a file
// each rank names, not to the terminal.
func TestQuitDumpsBenchRanks(t *testing.T) {
	before := shmLeftovers(t)
	cmd := exec.Command(bin, "bench", "put", "-n", "2", "-b", "1M", "-e", "4M", "--iters", "100000", "--timeout", "60s")
	cmd.Env = cleanEnv()
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(o.String(), "size(B)") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // into the first size
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	err := cmd.Wait()
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want a failure\n%s", err, e.String())
	}
	out := e.String()
	for _, want := range []string{"luacoll: SIGQUIT",
		"rank 0: bench put, measuring 1048576 bytes: ",
		"rank 1: bench put, measuring 1048576 bytes: ",
		"aborted: SIGQUIT (where each rank is)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%.3000s", want, out)
		}
	}
	if strings.Contains(out, "goroutine 1 ") {
		t.Errorf("the Go runtime's dump is on stderr:\n%.3000s", out)
	}
	files := regexp.MustCompile(`rank (\d): Go stacks: (\S+)`).FindAllStringSubmatch(out, -1)
	if len(files) != 2 {
		t.Fatalf("%d ranks named their Go stacks' file:\n%s", len(files), out)
	}
	for _, f := range files {
		b, err := os.ReadFile(f[2])
		if err != nil || !strings.Contains(string(b), "goroutine ") || !strings.Contains(string(b), "main.measureRank") {
			t.Errorf("rank %s: Go stacks %s: %v\n%.500s", f[1], f[2], err, b)
		}
		os.Remove(f[2])
	}
	checkClean(t, before)
}

// Under --nodes the Go stacks' files outlive the job: each rank writes its
// file to the launcher's temporary directory, not to its node's, which the
// launcher removes at the end.
func TestQuitStacksOutliveLogicalNodes(t *testing.T) {
	before := shmLeftovers(t)
	cmd, e := startRun(t, 2, "run", "-n", "2", "--nodes", "2", "--timeout", "60s", writeScript(t, waitingScript))
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	_ = cmd.Wait()
	files := regexp.MustCompile(`rank (\d): Go stacks: (\S+)`).FindAllStringSubmatch(e.String(), -1)
	if len(files) != 2 {
		t.Fatalf("%d ranks named their Go stacks' file:\n%s", len(files), e.String())
	}
	for _, f := range files {
		if b, err := os.ReadFile(f[2]); err != nil || !strings.Contains(string(b), "goroutine ") {
			t.Errorf("rank %s: Go stacks %s after the job: %v", f[1], f[2], err)
		}
		os.Remove(f[2])
	}
	checkClean(t, before)
}
