package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/trace"
)

// traceEvent is one decoded event of a --trace file.
type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

// readTrace reads a --trace file, requires it to pass trace.Check (the
// schema and each track's order) and returns its events.
func readTrace(t *testing.T, path string) []traceEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trace.Check(data); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var top struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	return top.TraceEvents
}

// find returns the events of rank pid named name.
func find(evs []traceEvent, pid int, name string) []traceEvent {
	var out []traceEvent
	for _, e := range evs {
		if e.PID == pid && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// `luacoll run --trace` writes one checked file with every rank's
// operations on its stream track, waits with their slot and value, the
// script line of each, and a collective instant per rank.
func TestTraceRun(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.json")
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096 }
local src = lc.buffer(64)
w:put_signal((lc.rank + 1) % lc.size, 0, src, 0, 64, 1)
w:wait_signal(1, ">=", 1)
w:barrier(0)
w:sync()
w:free()`)
	r := luacoll(t, nil, "run", "-n", "3", "--trace", out, s)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "trace of 3 ranks") {
		t.Errorf("stderr does not report the trace:\n%s", r.stderr)
	}
	evs := readTrace(t, out)
	for rank := range 3 {
		ps := find(evs, rank, "put_signal")
		ws := find(evs, rank, "wait_signal")
		if len(ps) != 1 || len(ws) != 1 || ps[0].TID != trace.TIDStream || !strings.HasSuffix(fmt.Sprint(ps[0].Args["at"]), "s.lua:4") {
			t.Fatalf("rank %d: put_signal %+v, wait_signal %+v", rank, ps, ws)
		}
		if w := ws[0].Args; w["slot"] != "sig 1" || w["cmp"] != ">=" || w["value"] != 1.0 {
			t.Errorf("rank %d: wait args %v", rank, w)
		}
		if len(find(evs, rank, "lc.window")) != 1 || len(find(evs, rank, "barrier")) != 1 || len(find(evs, rank, "sync")) == 0 {
			t.Errorf("rank %d: no window collective, barrier or sync", rank)
		}
	}
}

// A rank killed with SIGKILL mid-wait still leaves what it recorded up to
// then (its part is written as it goes), and the trace says how it ended.
func TestTraceKilledRank(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.json")
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096 }
local src = lc.buffer(64)
w:put((lc.rank + 1) % lc.size, 0, src, 0, 64)
w:sync()
local f = io.open(arg[1] .. "/pid" .. lc.rank, "w"); f:write(tostring(lc.rank)); f:close()
w:wait_signal(0, ">=", 1)
w:sync()`)
	cmd := exec.Command(bin, "run", "-n", "3", "--timeout", "60s", "--trace", out, s, dir)
	cmd.Env = cleanEnv()
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var victim int
	for deadline := time.Now().Add(30 * time.Second); victim == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "pid1")); err == nil {
			victim = findRank(t, cmd.Process.Pid, 1)
		}
	}
	if victim == 0 {
		cmd.Process.Kill()
		t.Fatal("rank 1 never started")
	}
	time.Sleep(400 * time.Millisecond) // the part is flushed every 100 ms
	_ = syscall.Kill(victim, syscall.SIGKILL)
	if err := cmd.Wait(); err == nil {
		t.Fatal("the run succeeded")
	}
	evs := readTrace(t, out)
	if len(find(evs, 1, "put")) != 1 || len(find(evs, 1, "lc.window")) != 1 {
		t.Fatalf("rank 1's events before it was killed are missing:\n%s", e.String())
	}
	exit := find(evs, 1, "exit")
	if len(exit) != 1 || !strings.Contains(fmt.Sprint(exit[0].Args["status"]), "killed by signal 9") {
		t.Fatalf("rank 1's exit: %+v", exit)
	}
	for _, rank := range []int{0, 2} {
		if len(find(evs, rank, "error")) == 0 {
			t.Errorf("rank %d recorded no error", rank)
		}
		if ws := find(evs, rank, "wait_signal"); len(ws) != 1 || ws[0].Args["failed"] != true {
			t.Errorf("rank %d: wait %+v, want one failed (ended by the abort)", rank, ws)
		}
	}
}

// Under an external launcher rank 0 merges the parts into the file over
// the bootstrap, and no part is left beside it.
func TestTraceExternalLauncher(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.json")
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
w:signal((lc.rank + 1) % lc.size, 0)
w:wait_signal(0, "==", 1)
w:sync()`)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	const n = 2
	outs := make([]result, n)
	var wg sync.WaitGroup
	for r := n - 1; r >= 0; r-- {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			env := []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(r),
				"LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
			outs[r] = luacoll(t, env, "run", "--trace", out, s)
		}(r)
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	for r, o := range outs {
		if o.code != 0 {
			t.Fatalf("rank %d: exit %d\n%s", r, o.code, o.stderr)
		}
	}
	evs := readTrace(t, out)
	for r := range n {
		if len(find(evs, r, "wait_signal")) != 1 || len(find(evs, r, "signal")) != 1 {
			t.Errorf("rank %d's operations are missing", r)
		}
	}
	if left, _ := filepath.Glob(out + ".rank*"); len(left) > 0 {
		t.Errorf("parts left behind: %v", left)
	}
}

// bench and repl take --trace too; a file that cannot be written is
// refused before any rank starts.
func TestTraceBenchReplAndBadPath(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "bench.json")
	r := luacoll(t, nil, "bench", "put", "-n", "2", "-b", "1K", "-e", "4K", "--iters", "2", "--trace", out)
	if r.code != 0 {
		t.Fatalf("bench: exit %d\n%s", r.code, r.stderr)
	}
	if puts := find(readTrace(t, out), 0, "put"); len(puts) == 0 || puts[0].Args["bytes"] == nil {
		t.Errorf("bench put: rank 0 has no put slices: %+v", puts)
	}

	out = filepath.Join(dir, "repl.json")
	cmd := exec.Command(bin, "repl", "-n", "2", "--trace", out)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader("w = lc.window{bytes = 64}\nw:barrier(1); w:sync()\n")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("repl: %v\n%s%s", err, o.String(), e.String())
	}
	evs := readTrace(t, out)
	for rank := range 2 {
		if b := find(evs, rank, "barrier"); len(b) != 1 || b[0].Args["slot"] != "barrier 1" {
			t.Errorf("repl rank %d: barrier %+v", rank, b)
		}
	}

	r = luacoll(t, nil, "run", "--trace", filepath.Join(dir, "no", "such", "dir", "t.json"))
	if r.code != 2 || !strings.Contains(r.stderr, "--trace") {
		t.Fatalf("bad path: exit %d\n%s", r.code, r.stderr)
	}
}

// --cpuprofile writes one CPU profile a rank into its directory (made if
// missing); a path that is a file is refused before any rank starts.
func TestCPUProfileRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096 }
w:barrier(0)
w:free()`)
	r := luacoll(t, nil, "run", "-n", "2", "--cpuprofile", dir, s)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for rank := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.pprof", rank)))
		// A profile is gzip-compressed protobuf.
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("rank %d's profile: %v (%d bytes)", rank, err, len(b))
		}
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = luacoll(t, nil, "run", "-n", "2", "--cpuprofile", file, s)
	if r.code == 0 || !strings.Contains(r.stderr, "--cpuprofile") {
		t.Fatalf("a file as --cpuprofile: exit %d\n%s", r.code, r.stderr)
	}
}
