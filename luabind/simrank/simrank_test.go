package simrank

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine/plan/cost"
)

// run simulates ranks ranks in nodes of per running script (as s.lua).
func run(t *testing.T, ranks, per int, script string, args ...string) (string, *Result, error) {
	t.Helper()
	return runCtx(context.Background(), t, ranks, per, script, args...)
}

func runCtx(ctx context.Context, t *testing.T, ranks, per int, script string, args ...string) (string, *Result, error) {
	t.Helper()
	m, err := cost.Default("host")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := Run(ctx, Options{Ranks: ranks, PerNode: per, Src: []byte(script), Name: "s.lua", Args: args,
		Model: m, ModelName: "host", Mode: "host", Real: []string{"lc.timer", "b:read", "w:read_signal", "lc.allgather", "w:put"},
		Stdout: &out})
	return out.String(), res, err
}

const ringScript = `
local lc = require("luacoll")
local ag = require("allgather")
local n = tonumber(arg[1])
local w = lc.window{ bytes = n * lc.size, signals = 1, counters = 1, barriers = 1 }
local src = lc.buffer(n)
local p = lc.plan(ag.ring, w, src, 0, n)
local rep = p:verify{ collective = "allgather", n = n, src = src }
if lc.rank == 0 then
  assert(rep.ok and not rep.pending, rep.summary)
  local e = p:estimate{}
  print("time", e.time, #e.path)
else
  assert(rep.pending)
end
`

// ringClosedForm checks that a ring all-gather of ranks ranks (one node,
// n bytes a rank) estimates at the alpha-beta closed form of the shipped
// host model's shm link, (ranks-1) steps of a put of n bytes, within 5 %,
// and returns the run's result. The ranks-2 steps that forward a chunk
// the left neighbour wrote pay the model's moved cost for its n bytes
// too (engine/plan/cost/moved.go), as cost's own closed-form test counts
// it.
func ringClosedForm(t *testing.T, ranks int, n uint64) *Result {
	t.Helper()
	out, res, err := run(t, ranks, ranks, ringScript, "1048576")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Estimates) != 1 || res.Plans != 1 || res.Verifies != 1 || res.Failed != 0 {
		t.Fatalf("result %+v\n%s", res, out)
	}
	m, _ := cost.Default("host")
	p := m.Modes["host"]["shm"]
	a, l := p.Put.Of(n)
	sa, sl := p.Signal.Of(0)
	wa, wl := p.Wait.Of(0)
	// A step is a put_signal and a wait, each paying the op cost (the
	// simulated ranks are not stretched: each has a processor).
	ma, ml := m.Modes["host"]["self"].Moved.Of(n)
	closed := float64(ranks-1)*(a+l+sa+sl+wa+wl+2*p.Op.AlphaNs) + float64(ranks-2)*(ma+ml)
	got := res.Estimates[0].Result.Time
	if got < 0.95*closed || got > 1.05*closed {
		t.Fatalf("%d ranks: estimate %.0f ns, closed form %.0f ns: %.1f %% off\n%s", ranks, got, closed, 100*(got/closed-1), out)
	}
	if !strings.Contains(out, "made and verified as allgather: ok: ") || !strings.Contains(out, "[0] time\t") {
		t.Fatalf("output:\n%s", out)
	}
	t.Logf("%d ranks: estimate %.3f ms, closed form %.3f ms (%+.2f %%); %.1f s, peak resident %s, Go heap %s",
		ranks, got/1e6, closed/1e6, 100*(got/closed-1), res.Elapsed.Seconds(), Bytes(res.PeakRSS), Bytes(res.HeapPeak))
	return res
}

func TestRingClosedForm64(t *testing.T) {
	ringClosedForm(t, 64, 1<<20)
}

// What needs data or real ranks is refused with the name of the call and
// the script's line, on the first rank simulated (the last).
func TestNeedsRealRanks(t *testing.T) {
	head := "local lc = require('luacoll')\nlocal w = lc.window{ bytes = 64 }\nlocal b = lc.buffer(8)\n"
	for _, c := range []struct{ body, want string }{
		{"b:read(0, 4)", "s.lua:4: check --simulate: b:read needs real ranks"},
		{"local t = lc.timer()", "s.lua:4: check --simulate: lc.timer needs real ranks"},
		{"w:put(0, 0, b, 0, 8)", "s.lua:4: check --simulate: w:put outside a plan needs real ranks"},
		{"print(w:read_signal(0, 0))", "s.lua:4: check --simulate: w:read_signal needs real ranks"},
		{"lc.windw{ bytes = 8 }", "s.lua:4: luacoll (lc) has no field windw"},
		{"lc.plan(function() w:put(9, 0, b, 0, 8) end)", "bad argument 'peer' (rank 9 is outside 0..3)"},
		{"lc.plan(function() w:put(0, 60, b, 0, 8) end)", "bad argument"},
		{"lc.plan(function() w:put(0, 0, b, 0, 8) end):verify{collective = 'allgather', n = 0}", "bad argument 'n' (0: a collective's result"},
		{"lc.plan(function() w:reduce(w, 0, b, 0, 8, 'f64') end):verify{collective = 'allreduce', n = 4}", "bad argument 'n' (4 bytes is not a whole number of the f64 elements"},
		{"lc.plan(function() w:put(0, 0, b, 0, 8) end):verify{collective = 'broadcast', n = 8, root = 9}", "bad argument 'root' (9 is outside 0..3)"},
		{"lc.plan(function() w:put(0, 0, b, 0, 8) end):verify{collective = 'allgather', n = 8, src = b, src_off = 4}", "bad argument 'n' (8 bytes at offset 4 run past the end of buffer b1"},
	} {
		out, _, err := run(t, 4, 2, head+c.body+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "simulated rank 3: ") {
			t.Errorf("%s: error %v, want one with %q\n%s", c.body, err, c.want, out)
		}
	}
}

// A plan that deadlocks fails verification on rank 0 (with the rank and
// line of the stuck wait), and ranks that make different plans are named.
func TestSimulatedFailures(t *testing.T) {
	stuck := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, signals = 1 }
local p = lc.plan(function()
  w:signal((lc.rank + 1) % lc.size, 0)
  w:wait_signal_from((lc.rank + 1) % lc.size, 0, ">=", 1)
end)
print("reached: the plan is verified when the next one is made, it is freed, or the script ends")
`
	out, res, err := run(t, 3, 3, stuck)
	if err == nil || !strings.Contains(err.Error(), "plan 1 (made at s.lua:4) failed verification") ||
		!strings.Contains(out, "deadlock: rank 2, op 2 (wait_signal_from at s.lua:6)") || res != nil {
		t.Fatalf("error %v\n%s", err, out)
	}
	extra := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, signals = 1 }
local function body() w:barrier() end
lc.plan(body)
if lc.rank == 2 then lc.plan(body) end
`
	if _, _, err := run(t, 3, 1, extra); err == nil || !strings.Contains(err.Error(), "rank 2 made plan 2 (at s.lua:6), rank 0 made only 1 plans") {
		t.Fatalf("an extra plan: %v", err)
	}
	fewer := strings.Replace(extra, "lc.rank == 2", "lc.rank == 0", 1)
	if _, _, err := run(t, 3, 1, fewer); err == nil || !strings.Contains(err.Error(), "simulated rank 1 made no plan 2 (rank 0 made it at s.lua:6)") {
		t.Fatalf("a missing plan: %v", err)
	}
}

// The other ranks record on several goroutines, yet a run reports what
// one rank after the other would: the highest rank that fails (the first
// to run), and each plan's site as the highest rank that made it saw it.
func TestRecordOthersInParallel(t *testing.T) {
	fails := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 6 or lc.rank == 3 then error("rank " .. lc.rank .. " gives up") end
`
	for i := 0; i < 5; i++ {
		_, _, err := run(t, 8, 8, fails)
		if err == nil || !strings.HasPrefix(err.Error(), "simulated rank 6: ") || !strings.Contains(err.Error(), "rank 6 gives up") {
			t.Fatalf("run %d: error %v, want rank 6's", i, err)
		}
	}
	sites := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local function body() w:barrier() end
local p
if lc.rank == 7 then
  p = lc.plan(body)
else
  p = lc.plan(body)
end
if lc.rank == 0 then print("own site " .. p:info().site) end
local q = lc.plan(body)
`
	for i := 0; i < 3; i++ {
		out, res, err := run(t, 8, 4, sites)
		if err != nil || res.Plans != 2 || !strings.Contains(out, "[0] own site s.lua:9") || !strings.Contains(out, "plan 1 (s.lua:7)") {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
	}
	// A rank below a failing one that runs when it fails is stopped: the
	// run ends with the failure, not when the loop would.
	loops := `
local lc = require("luacoll")
if lc.rank == 6 then for i = 1, 2000000 do end error("rank 6 gives up") end
if lc.rank < 6 then while true do end end
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := runCtx(ctx, t, 8, 8, loops); err == nil || !strings.Contains(err.Error(), "rank 6 gives up") || ctx.Err() != nil {
		t.Fatalf("a failure beside a rank that loops: %v (the run's context: %v)", err, ctx.Err())
	}
}

// Simulated ranks load a script as luacoll run does: past a byte-order
// mark and a "#" first line, line numbers kept.
func TestSimulatedScriptHead(t *testing.T) {
	_, _, err := run(t, 4, 4, "\xef\xbb\xbf#!/usr/bin/env luacoll\nlocal lc = require('luacoll')\nerror('on line 3')\n")
	if err == nil || !strings.Contains(err.Error(), "s.lua:3: on line 3") {
		t.Fatalf("error %v, want the script's own, at line 3", err)
	}
}

// A run stopped from outside (an interrupt) says where, and why.
func TestSimulatedStopped(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel(errors.New("test interrupt"))
	}()
	_, _, err := runCtx(ctx, t, 8, 8, "while true do end\n")
	if err == nil || !strings.HasPrefix(err.Error(), "simulated ranks: stopped at rank ") || !strings.Contains(err.Error(), "test interrupt") {
		t.Fatalf("error %v, want where the run stopped and why", err)
	}
}

// lc.nodes and the rank fields follow the layout.
func TestLayoutFields(t *testing.T) {
	script := `
local lc = require("luacoll")
local t = lc.nodes()
assert(#t.groups == 3 and #t.groups[1] == 2 and t.groups[3][2] == 5, "groups")
assert(t.node == lc.node + 1 and t.local_index == lc.local_rank + 1 and lc.local_size == 2)
if lc.rank == 5 then assert(lc.node == 2 and lc.local_rank == 1) end
print(lc.rank, lc.size, lc.node)
`
	out, _, err := run(t, 6, 2, script)
	if err != nil || out != "[0] 0\t6\t0\n" {
		t.Fatalf("error %v, output %q", err, out)
	}
}

// FuzzParseLayout: any text gives a layout of positive sizes that prints
// back as it was written, or an error naming it.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"128x8", "1x1", "x8", "8x", "2x4x1", "-1x4", "0x3", " 2x4", "2X4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nodes, per, err := ParseLayout(s)
		if err != nil {
			if !strings.Contains(err.Error(), "want NODESxRANKS") {
				t.Fatalf("%q: error %v does not say what is wanted", s, err)
			}
			return
		}
		if nodes < 1 || per < 1 {
			t.Fatalf("%q: %d nodes of %d", s, nodes, per)
		}
	})
}

// BenchmarkSimulatedRing256 records, verifies and estimates a 256-rank
// ring all-gather (32 nodes of 8).
func BenchmarkSimulatedRing256(b *testing.B) {
	m, err := cost.Default("host")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var out bytes.Buffer
		res, err := Run(context.Background(), Options{Ranks: 256, PerNode: 8, Src: []byte(ringScript), Name: "s.lua",
			Args: []string{"65536"}, Model: m, ModelName: "host", Mode: "host", Stdout: &out})
		if err != nil || res.Failed > 0 {
			b.Fatalf("%v\n%s", err, out.String())
		}
	}
}

// rankNamed is how a simulated rank's error begins.
var rankNamed = regexp.MustCompile(`simulated rank [01]: `)

// FuzzSimulatedArgs: window operations with any arguments, in a plan and
// out of one, raise an error naming the rank and the call, or record;
// nothing panics.
func FuzzSimulatedArgs(f *testing.F) {
	f.Add("put_signal", int64(1), int64(0), int64(0), int64(8), int64(0), "add", true)
	f.Add("wait_signal_from", int64(-1), int64(3), int64(1<<40), int64(2), int64(9), ">=", false)
	f.Add("reduce", int64(0), int64(4), int64(0), int64(4), int64(0), "sum", true)
	f.Fuzz(func(t *testing.T, op string, a, b, c, d, e int64, s string, inPlan bool) {
		call := fmt.Sprintf("w:%s(%d, %d, src, %d, %d, %d, %q)", op, a, b, c, d, e, s)
		switch op {
		case "wait_signal", "wait_signal_from", "wait_counter", "signal", "signal_all", "barrier", "barrier_peer", "reset_counter":
			call = fmt.Sprintf("w:%s(%d, %d, %q, %d)", op, a, b, s, c)
		case "reduce", "reduce_from":
			call = fmt.Sprintf("w:%s(%d, %d, src, %d, %d, %q, %q)", op, a, b, c, d, "f32", s)
		}
		body := call
		if inPlan {
			body = "lc.plan(function() " + call + " end)"
		}
		script := "local lc = require('luacoll')\nlocal w = lc.window{ bytes = 64, signals = 2 }\nlocal src = lc.buffer(16)\n" + body + "\n"
		_, _, err := run(t, 2, 1, script)
		// Ranks run last first: a bad call fails rank 1, where rank 1
		// runs it; a plan that fails verification fails rank 0, which
		// verifies every rank's list.
		if err != nil && !rankNamed.MatchString(err.Error()) {
			t.Fatalf("%s: error %v does not name the rank", body, err)
		}
	})
}

// A long verification shows on the progress stream how far it has got:
// the plan's number and the share of its ops simulated.
func TestProgressVerifying(t *testing.T) {
	m, err := cost.Default("host")
	if err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	_, err = Run(context.Background(), Options{Ranks: 256, PerNode: 8, Src: []byte(ringScript), Name: "s.lua", Args: []string{"4096"},
		Model: m, ModelName: "host", Mode: "host", Stdout: &out, Progress: &progress, ProgressEvery: time.Millisecond})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	line := regexp.MustCompile(`(?m)^luacoll check: verifying plan 1 \d+ % of \d+ k ops \(\d+\.\d s, .* resident\)$`)
	if !line.Match(progress.Bytes()) {
		t.Fatalf("no progress line of the verification:\n%s", progress.String())
	}
}

// The reduction schedules record under simulation: w:info and
// w:transport answer from the layout and the model (the staged schedules
// ask which memory the window has and how each peer is reached), and
// p:verify takes calls as under luacoll run; a count of calls that does
// not divide a list is refused, naming the rank.
func TestSimulatedReductions(t *testing.T) {
	const script = `
local lc = require("luacoll")
local rs, ar = require("reduce_scatter"), require("all_reduce")
local n = 64 * lc.size
local w = lc.window{ bytes = 4 * lc.size * lc.size * n + 64 }
if lc.rank == 0 then
  print("info", w:info().memory, w:info().mode, w:transport(0), w:transport(1), w:transport(lc.size - 1))
end
local calls = tonumber(arg[1])
local p = lc.plan(function(w) for _ = 1, 2 do rs.push(w, n) end end, w)
local rep = p:verify{ collective = "reduce_scatter", window = w, n = n, calls = calls }
if lc.rank == 0 then print("push", rep.summary) end
local q = lc.plan(function(w) for _ = 1, 2 do ar.one_shot(w, n) end end, w)
rep = q:verify{ collective = "allreduce", window = w, n = n, calls = calls }
if lc.rank == 0 then print("one_shot", rep.summary) end
`
	out, _, err := run(t, 8, 4, script, "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[0] info\thost\tsimulated\tself\tshm\tnet", "[0] push\tok: 8 ranks", "[0] one_shot\tok: 8 ranks"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	_, _, err = run(t, 8, 4, script, "3")
	if err == nil || !strings.Contains(err.Error(), "bad argument 'calls' (rank 0 recorded") {
		t.Fatalf("calls = 3: %v", err)
	}
}
