package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CLI tests of what an adversarial run found (exit statuses, scripts from
// odd places, messages that name the cause).

// luacollIn is luacoll with stdin as the command's standard input.
func luacollIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("luacoll %v: %v", args, err)
	}
	return r
}

// TestRefusedAllGatherPairsRight is the case from the command
// line: rank 0's refused lc.allgather counts, so both ranks' second call
// gets both second values and the job ends cleanly.
func TestRefusedAllGatherPairsRight(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
if lc.rank == 0 then print(pcall(lc.allgather, print)) else print(pcall(lc.allgather, "r1-first")) end
print(table.concat(lc.allgather("r" .. lc.rank .. "-second"), " | "))`)
	r := luacoll(t, nil, "run", "-n", "2", s)
	if r.code != 0 || strings.Count(r.stdout, "r0-second | r1-second") != 2 || !strings.Contains(r.stdout, "[1] false") ||
		!strings.Contains(r.stdout, "rank 0 refused it") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestScriptFromStdinAndFIFO: the launcher reads the script once and every
// rank runs those bytes: standard input as /dev/stdin or -, and a FIFO.
func TestScriptFromStdinAndFIFO(t *testing.T) {
	for _, path := range []string{"/dev/stdin", "-"} {
		r := luacollIn(t, `print("hello", ...); require("luacoll").barrier(); error("x")`, "run", "-n", "2", path, "a1")
		if r.code != 1 || !strings.Contains(r.stdout, "[0] hello\ta1") || !strings.Contains(r.stdout, "[1] hello\ta1") ||
			!strings.Contains(r.stderr, ":1: x") {
			t.Errorf("%s: exit %d\n%s\n%s", path, r.code, r.stdout, r.stderr)
		}
	}
	r := luacollIn(t, `print(arg[0])`, "run", "-n", "1", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] stdin") {
		t.Errorf("arg[0] of -: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fifo := filepath.Join(t.TempDir(), "script.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		// A FIFO can be read once: ranks that opened it too would hang.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.WriteString(`print("from the fifo", require("luacoll").rank)`)
			f.Close()
		}
	}()
	r = luacoll(t, nil, "run", "-n", "3", "--timeout", "5s", fifo)
	if r.code != 0 || strings.Count(r.stdout, "from the fifo") != 3 {
		t.Errorf("fifo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
