package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rank stopped in the middle of a loop of two-level all-gathers across
// logical nodes is the one the others name, also rank 0, which waits for
// what its local neighbour (rank 1) forwards from rank 3 (rank 1 and rank
// 3 share an index on the two nodes): not the healthy neighbour. (Where
// the stop falls between rank 3's barrier arrivals, rank 0 names its
// counterpart, rank 2, and rank 2 names rank 3.)
func TestHierNamesTheStoppedRank(t *testing.T) {
	needUCX(t)
	dir := t.TempDir()
	s := writeScript(t, `local lc = require("luacoll")
local n = 1048576
local w = lc.window{ bytes = n * lc.size, timeout_ms = 1500 }
local ag = lc.allgather_persistent{ window = w, algo = "hier" }
local src = lc.buffer(n); src:fill("rand", lc.rank)
local f = io.open(arg[1] .. "/pid" .. lc.rank, "w"); f:write("x"); f:close()
for it = 1, 1000000 do
  ag:exec(src, 0, n)
  lc.sync()
end`)
	cmd := exec.Command(bin, "run", "-n", "4", "--nodes", "2", "--timeout", "20s", s, dir)
	cmd.Env = cleanEnv()
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "pid3")); err == nil {
			pid = findRank(t, cmd.Process.Pid, 3)
		}
	}
	if pid == 0 {
		t.Fatalf("rank 3 never started\n%s", e.String())
	}
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the job did not end\n%s", e.String())
	}
	var line0, line2 string
	for _, l := range strings.Split(e.String(), "\n") {
		if strings.HasPrefix(l, "[0]") && line0 == "" {
			line0 = l
		}
		if strings.HasPrefix(l, "[2]") && line2 == "" {
			line2 = l
		}
	}
	// Stopped between its barrier arrivals (those to the other node's
	// ranks sent, the one to rank 2 not), rank 3 lets ranks 0 and 1 into
	// the exec and holds rank 2 at the barrier: rank 0 then waits for
	// its counterpart, rank 2, whose own error names rank 3.
	between := strings.Contains(line0, "waiting for rank 2's chunk") && strings.Contains(line2, "held up by rank 3")
	if !strings.Contains(line0, "rank 3") && !between {
		t.Fatalf("rank 0 does not name rank 3:\n%s", e.String())
	}
	t.Logf("%s", line0)
}
