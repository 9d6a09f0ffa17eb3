package luabind

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// runLuaThen is runLuaWith that calls after(rank, state) once the chunk
// has run on that rank, before the rank closes.
func runLuaThen(t *testing.T, n int, code string, after func(r int, s *State)) []rankResult {
	t.Helper()
	return runLuaRanks(t, n, code, "test.lua", 5*time.Second, after)
}

// lineOf returns the 1-based line of code holding marker.
func lineOf(t *testing.T, code, marker string) int {
	t.Helper()
	for i, l := range strings.Split(code, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no line with %q", marker)
	return 0
}

// TestPlanLibrarySchedules records ring and direct from scripts/lib as
// plans, verifies them as all-gathers (with and without naming the
// source), and replays them 1000 times with new data each time, checking
// every chunk after every replay, then 100 back to back.
func TestPlanLibrarySchedules(t *testing.T) {
	code := `
local lc = require("luacoll")
local ag = require("allgather")
local algo, n = ...
local w = lc.window{ bytes = n * lc.size + 7 }
local src = lc.buffer(n + 5)
local p = lc.plan(function(w, src, n) ag[algo](w, src, 5, n) end, w, src, n)
local info = p:info()
assert(info.mode == "host" and info.replays == 0 and info.buffers == 1 and info.ranks == lc.size, "info")
local rep = p:verify{ collective = "allgather", window = w, n = n }
assert(rep.ok, rep.summary)
rep = p:verify{ collective = "allgather", n = n, src = src, src_off = 5, replays = 3 }
assert(rep.ok, rep.summary)
assert(#rep.ops == lc.size and rep.ops[lc.rank + 1] == info.ops and rep.steps >= 3, "report")
local refs = {}
for r = 0, lc.size - 1 do refs[r] = lc.buffer(n + 5) end
local iters = tonumber(os.getenv("PLAN_ITERS") or "1000")
for i = 1, iters do
  src:fill("rand", i * 64 + lc.rank)
  p:run()
  w:sync()
  for r = 0, lc.size - 1 do
    refs[r]:fill("rand", i * 64 + r)
    assert(w:buffer():equal(refs[r], r * n, 5, n), ("replay %d chunk %d"):format(i, r))
  end
end
src:fill("rand", 7 + lc.rank)
p:run{ times = 100 }
w:sync()
for r = 0, lc.size - 1 do
  refs[r]:fill("rand", 7 + r)
  assert(w:buffer():equal(refs[r], r * n, 5, n), "burst chunk " .. r)
end
assert(p:info().replays == iters + 100, "replays")
p:free()
print("plan ok")
`
	iters := "1000"
	if testing.Short() {
		iters = "50"
	}
	t.Setenv("PLAN_ITERS", iters)
	for _, tc := range []struct {
		ranks int
		n     int
	}{{2, 1000003%4096 + 13}, {3, 1}, {4, 4096}, {8, 333}} {
		for _, algo := range []string{"ring", "direct"} {
			t.Run(fmt.Sprintf("%s/%d/%d", algo, tc.ranks, tc.n), func(t *testing.T) {
				if tc.ranks == 8 && testing.Short() {
					t.Skip("short")
				}
				res := runLuaArgs(t, tc.ranks, code, algo, fmt.Sprint(tc.n))
				mustAllOK(t, res)
			})
		}
	}
}

// runLuaArgs runs code with ... = args on n ranks; code starts with a
// newline and keeps its line numbers.
func runLuaArgs(t *testing.T, n int, code string, args ...string) []rankResult {
	t.Helper()
	var b strings.Builder
	b.WriteString("local __a = {")
	for _, a := range args {
		fmt.Fprintf(&b, "%q,", a)
	}
	// On one line, so that the code keeps its line numbers (it starts
	// with a newline).
	b.WriteString("}; local function __main(...) ")
	b.WriteString(code)
	b.WriteString("\nend\n__main(__a[1], tonumber(__a[2]) or __a[2], select(3, unpack(__a)))\n")
	return runLuaWith(t, n, b.String(), "test.lua", 5*time.Second)
}

// TestPlanGoldenOps records ring and direct at 4 ranks and compares every
// rank's op list with testdata/plans (go test -update rewrites them).
func TestPlanGoldenOps(t *testing.T) {
	for _, algo := range []string{"ring", "direct"} {
		code := fmt.Sprintf(`
local lc = require("luacoll")
local ag = require("allgather")
local n = 1024
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
P = lc.plan(ag.%s, w, src, 0, n)
`, algo)
		lists := make([]string, 4)
		res := runLuaThen(t, 4, code, func(r int, s *State) {
			p := s.L.GetGlobal("P").(*lua.LUserData).Value.(*planRef)
			var b strings.Builder
			for i, o := range p.p.Ops() {
				fmt.Fprintf(&b, "rank %d op %d: %s\n", r, i+1, o)
			}
			lists[r] = b.String()
		})
		mustAllOK(t, res)
		got := strings.Join(lists, "")
		path := filepath.Join("..", "testdata", "plans", algo+"-4.txt")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(want) {
			t.Fatalf("%s: op lists differ from %s:\n%s", algo, path, got)
		}
	}
}

// TestPlanRecording: what recording refuses, with the line that tried,
// and the checks made at record time; every failure reaches every rank.
func TestPlanRecording(t *testing.T) {
	code := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 300 }
local w2 = lc.window{ bytes = 64 }
local b = lc.buffer(16)
local function fails(text, body, ...)
  local ok, err = pcall(lc.plan, body, ...)
  assert(not ok, "no error: " .. text)
  if not err:find(text, 1, true) then error(("want %q in %q"):format(text, err), 2) end
  print("ERR " .. err)
end
fails("test.lua:{{READ}}: rank " .. lc.rank .. ": b:read: cannot b:read while recording a plan", function() w:put(0, 0, b, 0, 4)
  local x = b:read(0, 4) -- READ
end)
fails("cannot w:read_signal while recording a plan", function() w:read_signal(0) end)
fails("cannot w:sync while recording a plan", function() w:sync() end)
fails("cannot lc.barrier while recording a plan", function() lc.barrier() end)
fails("cannot lc.allgather while recording a plan", function() lc.allgather(1) end)
fails("cannot b:checksum while recording a plan", function() b:checksum() end)
fails("cannot b:write while recording a plan", function() b:write(0, "x") end)
fails("cannot lc.plan while recording a plan", function() lc.plan(function() end) end)
fails("cannot lc.window while recording a plan", function() lc.window{ bytes = 8 } end)
fails("test.lua:{{BOUNDS}}: rank " .. lc.rank .. ": w:put: bad argument 'n' (16 bytes at offset 60 run past the end of the window on rank 1 (64 bytes))", function()
  w:put(1, 60, b, 0, 16) -- BOUNDS
end)
fails("w:wait_signal: bad argument 'sig' (signal 9 is outside 0..7)", function() w:wait_signal(9, ">=", 1) end)
fails("w:put: bad argument 'src_off' (offset 17 is past the end of buffer b1", function() w:put(1, 0, b, 17, 0) end)
fails("a plan records the operations of one window: this body already used window 0, not window 1", function() w:fence(); w2:fence() end)
fails("the body enqueued no window operation", function() b:fill("const", 1) end)
fails("bad argument 'mode' (\"graph\" needs the CUDA backend; this rank has host, where plans run as \"host\")", function() w:fence() end, { mode = "graph" })
fails("bad argument 'mode' (\"stream\" needs the CUDA backend", function() w:fence() end, { mode = "stream" })
fails("bad argument 'mode' (\"device\" needs the CUDA backend; this rank has host, where plans run as \"host\")", function() w:fence() end, { mode = "device" })
if lc.rank == 0 then
  fails("the body failed: test.lua:{{BOOM}}: boom", function() w:fence(); if lc.rank == 0 then error("boom") end end) -- BOOM
else
  fails("failed on other ranks: rank 0: the body failed: test.lua:{{BOOM}}: boom", function() w:fence(); if lc.rank == 0 then error("boom") end end)
end
-- a good plan
local p = lc.plan(function(x) -- PLAN
  b:fill("iota", 7) -- FILL
  w:put_signal((lc.rank + 1) % lc.size, 8, b, 4, 4, 2, 1, "add") -- PUT
  w:wait_signal(2, ">=", x) -- WAIT
end, 1, { mode = "host" })
local ops = p:ops()
assert(#ops == 3 and ops[1].op == "fill" and ops[1].buf == "b1" and ops[1].kind == "iota" and ops[1].arg == 7, "fill op")
local o = ops[2]
assert(o.op == "put_signal" and o.peer == (lc.rank + 1) % lc.size and o.off == 8 and o.src == "b1" and o.src_off == 4 and o.n == 4
  and o.sig == 2 and o.value == 1 and o.sigop == "add" and o.file == "test.lua" and o.line == {{PUT}}, "put_signal op")
assert(ops[3].op == "wait_signal" and ops[3].cmp == ">=" and ops[3].value == 1 and ops[3].line == {{WAIT}}, "wait op")
local info = p:info()
assert(info.ops == 3 and info.mode == "host" and info.window == 0 and info.buffers == 1 and info.site == "test.lua:{{PLAN}}", info.site)
for _, f in ipairs{ function() p:run{ window = w2 } end, function() p:verify{ window = w2 } end } do
  local ok, err = pcall(f)
  assert(not ok and err:find("the plan was recorded on window 0 and runs on it only; window 1 given", 1, true), err)
end
local ok, err = pcall(function() p:run{ times = 0 } end)
assert(not ok and err:find("bad argument 'times'", 1, true), err)
p:run{ times = 3 }
w:sync()
assert(w:read_signal(2) == 3 and b:get_u32(0) == 7, "replayed")
-- Replayed, the fill of the next replay may overwrite b before this
-- replay's put has read it: nothing flushes between them. And the next
-- replay's put may land before this one's: nothing fences them, and
-- nothing the sender waits for says the first has landed.
local rep = p:verify()
assert(not rep.ok, rep.summary)
local fills, puts = 0, 0
for _, pr in ipairs(rep.problems) do
  assert(pr.kind == "race" and pr.replay == 2 and pr.other.line == {{PUT}}, pr.message)
  if pr.line == {{FILL}} then
    assert(pr.rank == fills and pr.message:find("source overwritten before its put completed locally", 1, true), pr.message)
    fills = fills + 1
  else
    assert(pr.line == {{PUT}} and pr.message:find("two writes into one range that nothing orders", 1, true), pr.message)
    puts = puts + 1
  end
end
assert(fills == lc.size and puts == lc.size, rep.summary)
p:free()
ok, err = pcall(function() p:run() end)
assert(not ok and err:find("p:run: plan 19 has been freed", 1, true), err)
-- a replayed wait that times out names the line that recorded it
local q = lc.plan(function() w:wait_signal_from((lc.rank + 1) % lc.size, 5, ">=", 1) end) -- STUCK
q:run()
ok, err = pcall(function() w:sync() end)
assert(not ok and err:find("wait_signal_from(peer " .. (lc.rank + 1) % lc.size .. ", sig 5) >= 1 (enqueued at test.lua:{{STUCK}}): timed out", 1, true), err)
print("recording ok")
`
	for _, m := range []string{"READ", "BOUNDS", "BOOM", "PLAN", "PUT", "WAIT", "STUCK", "FILL"} {
		code = strings.ReplaceAll(code, "{{"+m+"}}", fmt.Sprint(lineOf(t, code, "-- "+m)))
	}
	res := runLua(t, 2, code)
	for r := len(res) - 1; r >= 0; r-- {
		if res[r].err != nil {
			t.Fatalf("rank %d: %v\noutput:\n%s", r, res[r].err, res[r].out)
		}
	}
	for r, x := range res {
		if !strings.Contains(x.out, "recording ok") {
			t.Fatalf("rank %d:\n%s", r, x.out)
		}
	}
}

// TestPlanVerifyPlanted: a ring all-gather written in the test with one
// bug planted at a time; p:verify names the rank and the line of each.
func TestPlanVerifyPlanted(t *testing.T) {
	code := `
local lc = require("luacoll")
local case = ...
local n = 100
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
local me, size = lc.rank, lc.size
local right, left = (me + 1) % size, (me - 1 + size) % size
local function ring(w, src, n)
  w:barrier(0)
  w:put(me, me * n, src, 0, n)
  if case == "reuse" then src:fill("const", 1) end -- REUSE
  w:flush()
  for s = 0, size - 2 do
    local chunk = (me - s + size) % size
    if case == "missing" and me == 2 and s == 0 then
      w:put(right, chunk * n, w, chunk * n, n) -- MISSING
    elseif case == "peer" and me == 1 and s == 1 then
      w:put_signal((me + 2) % size, chunk * n, w, chunk * n, n, 0) -- PEER
    elseif case == "offbyone" and me == 2 and s == 1 then
      w:put_signal(right, chunk * n + 1, w, chunk * n, n - 1, 0) -- OFFBYONE
    else
      w:put_signal(right, chunk * n, w, chunk * n, n, 0) -- NORMAL
    end
    w:wait_signal_from(left, 0, ">=", s + 1) -- WAIT
  end
  if case == "nobody" then w:wait_signal_from(left, 5, ">=", 1) end -- NOBODY
  if case == "twoputs" and (me == 1 or me == 2) then w:put(0, 0, src, 0, 8) end -- TWOPUTS
end
local p = lc.plan(ring, w, src, n)
local rep = p:verify{ collective = "allgather", window = w, n = n, src = src }
assert(rep.ok == (case == "none"), rep.summary)
for _, pr in ipairs(rep.problems) do
  local o = pr.other or {}
  print(("P %s %d %d %d %d | %s"):format(pr.kind, pr.rank, pr.line, o.rank or -1, o.line or -1, pr.message))
end
`
	line := func(m string) int { return lineOf(t, code, "-- "+m) }
	type want struct {
		kind               string
		rank, line         int
		otherRank, otherLn int // -2: any
		text               string
	}
	for _, tc := range []struct {
		name string
		want []want
	}{
		{"none", nil},
		{"missing", []want{
			{"race", 3, line("NORMAL"), 2, line("MISSING"), "a put source read while a write into it may still be arriving"},
			{"deadlock", 3, line("WAIT"), -1, -1, "waits for signal 0 from rank 2 >= 3, which is 2"}}},
		{"peer", []want{{"deadlock", 2, line("WAIT"), -1, -1, fmt.Sprintf("rank 1 signals rank 3 instead at op 6 (test.lua:%d)", line("PEER"))}}},
		{"offbyone", []want{{"postcondition", 2, line("OFFBYONE"), -1, -1, "rank 3's window bytes [101, 200) hold rank 1's source b1 bytes from offset 0 of replay 2, expected rank 1's chunk: rank 1's source b1 bytes from offset 1 of replay 2"}}},
		{"nobody", []want{{"deadlock", 0, line("NOBODY"), -1, -1, "waits for signal 5 from rank 3 >= 1, which is 0"}}},
		{"twoputs", []want{{"race", 2, line("TWOPUTS"), 1, line("TWOPUTS"), "two writes into one range that nothing orders"}}},
		{"reuse", []want{{"race", 1, line("REUSE"), 1, line("REUSE") - 1, "a source overwritten before its put completed locally"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runLuaArgs(t, 4, code, tc.name)
			mustAllOK(t, res)
			out := res[0].out
			for _, w := range tc.want {
				prefix := fmt.Sprintf("P %s %d %d ", w.kind, w.rank, w.line)
				if w.otherRank != -2 {
					prefix += fmt.Sprintf("%d %d ", w.otherRank, w.otherLn)
				}
				found := false
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, prefix) && strings.Contains(l, w.text) {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem %q ... %q in:\n%s", prefix, w.text, out)
				}
			}
			// every rank got the same report
			for r := 1; r < len(res); r++ {
				if res[r].out != out {
					t.Errorf("rank %d's report differs:\n%s", r, res[r].out)
				}
			}
		})
	}
}

// BenchmarkPlanSignalRoundTrip is BenchmarkLuaSignalRoundTrip's step
// (put_signal to itself, wait_signal_from) recorded once into a plan and
// replayed b.N times, each replay synced: one Lua call per step instead of
// two, and no Lua per op.
func BenchmarkPlanSignalRoundTrip(b *testing.B) {
	code := fmt.Sprintf(`local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local src = lc.buffer(8)
local p = lc.plan(function()
  w:put_signal(0, 0, src, 0, 8, 0)
  w:wait_signal_from(0, 0, ">=", 1)
end)
for i = 1, %d do
  p:run()
  w:sync()
end
assert(w:read_signal(0) == %d)
w:free()`, b.N, b.N)
	runLuaBench(b, code)
}

// BenchmarkPlanRingReplay: a 4-op plan of 16 puts with signals and waits
// on one rank (a ring of itself), replayed b.N times back to back with one
// sync at the end: the cost of the Go loop per replay.
func BenchmarkPlanRingReplay(b *testing.B) {
	code := fmt.Sprintf(`local lc = require("luacoll")
local w = lc.window{ bytes = 1024 }
local p = lc.plan(function()
  for i = 1, 16 do
    w:put_signal(0, (i %% 8) * 64, w, 512 + (i %% 8) * 64, 64, 0)
    w:wait_signal_from(0, 0, ">=", i)
  end
end)
p:run{ times = %d }
w:sync()
w:free()`, b.N)
	runLuaBench(b, code)
}

// p:verify refuses an n that would check nothing or part of a result: 0
// with a collective, and a reduction's n cut inside an element.
func TestPlanVerifyN(t *testing.T) {
	res := runLua(t, 2, `
local lc = require("luacoll")
local ar = require("all_reduce")
local w = lc.window{ bytes = 4096 }
local p = lc.plan(ar.two_shot_pull, w, 64, { type = "f32" })
local ok, err = pcall(function() return p:verify{ collective = "allreduce", n = 0 } end)
assert(not ok and err:find("bad argument 'n' (0: a collective's result needs at least one byte a rank)", 1, true), err)
ok, err = pcall(function() return p:verify{ collective = "allreduce", n = 63 } end)
assert(not ok and err:find("bad argument 'n' (63 bytes is not a whole number of the f32 elements the plan reduces)", 1, true), err)
assert(p:verify{ collective = "allreduce", n = 64 }.ok)
print("ok")`)
	mustAllOK(t, res)
}

// A broadcast's source is the root's alone: the other ranks' plans need
// not use the buffer named, and a root that broadcasts another buffer is
// a wrong result. src_off past the source, a root outside the ranks and
// an n past the window are argument errors.
func TestPlanVerifyBroadcastSource(t *testing.T) {
	res := runLua(t, 3, `
local lc = require("luacoll")
local n = 64
local w = lc.window{ bytes = 64, signals = 1 }
local src, other = lc.buffer(n), lc.buffer(n)
local function bcast(from)
  return lc.plan(function()
    w:barrier(0)
    if lc.rank == 0 then
      w:put(0, 0, src, 0, n)
      for q = 1, lc.size - 1 do w:put_signal(q, 0, from, 0, n, 0, 1, "add") end
      w:flush()
    else
      w:wait_signal_from(0, 0, ">=", 1)
    end
  end)
end
local p = bcast(src)
local rep = p:verify{ collective = "broadcast", n = n, src = src }
assert(rep.ok, rep.summary)
p:free()
p = bcast(other)
rep = p:verify{ collective = "broadcast", n = n, src = src }
assert(not rep.ok and rep.summary:find("result", 1, true), rep.summary)
for _, c in ipairs{
  { { src_off = 8 }, "bad argument 'n' (64 bytes at offset 8 run past the end of buffer" },
  { { root = 9 }, "bad argument 'root' (9 is outside 0..2)" },
  { { n = 2^40 }, "bad argument 'n' (broadcast of n=1099511627776 needs 1099511627776 bytes of window; it has 64)" },
} do
  local o = { collective = "broadcast", n = c[1].n or n, src = src, src_off = c[1].src_off, root = c[1].root }
  local ok, err = pcall(function() return p:verify(o) end)
  assert(not ok and err:find(c[2], 1, true), tostring(err))
end
print("ok")`)
	mustAllOK(t, res)
}

// A p:verify where only some ranks name the source fails on every rank
// (none goes on to the report's collective alone).
func TestPlanVerifySourceOnSomeRanks(t *testing.T) {
	res := runLua(t, 3, `
local lc = require("luacoll")
local ag = require("allgather")
local w = lc.window{ bytes = 30 }
local src = lc.buffer(10)
local p = lc.plan(ag.direct, w, src, 0, 10)
local ok, err = pcall(function() return p:verify{ collective = "allgather", n = 10, src = lc.rank == 1 and src or nil } end)
assert(not ok and err:find("bad argument 'src' (ranks 0,2 name none; every rank must, or none)", 1, true), err)
assert(p:verify{ collective = "allgather", n = 10 }.ok)
print("ok")`)
	mustAllOK(t, res)
}

// A plan recorded after the same schedule ran eagerly on the window (its
// Lua counts already include those signals) verifies clean and replays
// right; before, the verifier started every slot at zero and reported a
// deadlock that could not happen. A wait the eager signals cannot cover is
// still a deadlock.
func TestPlanVerifyAfterEagerCalls(t *testing.T) {
	res := runLua(t, 3, `
local lc = require("luacoll")
local ag = require("allgather")
local n = 64
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
for i = 1, 2 do
  src:fill("rand", i * 8 + lc.rank)
  ag.ring(w, src, 0, n); ag.direct(w, src, 0, n); lc.sync()
end
w:signal_all(1, "add", 5); w:put_counter((lc.rank + 1) % lc.size, 0, src, 0, 8, 0, 3); lc.sync()
local p = lc.plan(ag.ring, w, src, 0, n)
local rep = p:verify{ collective = "allgather", window = w, n = n }
assert(rep.ok, rep.summary)
for i = 1, 3 do
  src:fill("rand", 100 + i * 8 + lc.rank)
  p:run(); lc.sync()
  local ref = lc.buffer(n)
  for r = 0, lc.size - 1 do
    ref:fill("rand", 100 + i * 8 + r)
    assert(w:buffer():equal(ref, r * n, 0, n), "chunk " .. r)
  end
  ref:free()
end
-- eager signals counted: 2 x 5 from the others; a wait for 11 hangs
local q = lc.plan(function(w) w:wait_signal(1, ">=", 11) end, w)
rep = q:verify{}
assert(not rep.ok and rep.summary:find("deadlock", 1, true) and rep.summary:find("which is 10", 1, true), rep.summary)
local q2 = lc.plan(function(w) w:wait_signal(1, ">=", 10); w:wait_counter((lc.rank + 1) % lc.size, 0, ">=", 3) end, w)
rep = q2:verify{}
assert(rep.ok, rep.summary)
print("ok")`)
	mustAllOK(t, res)
}

// A plan cannot reach around the guards of its window: a body that uses
// the persistent all-gather's slots is refused as the window refuses the
// same calls, a plan made before the all-gather and using them is refused
// at p:run, a reduce_from of the rank's own window into overlapping bytes
// is refused as it is recorded (and so never half-replays), and a plan
// recorded before w:reset_signals() refuses to run or verify.
func TestPlanGuards(t *testing.T) {
	res := runLua(t, 2, `
local me, p = lc.rank, 1 - lc.rank
local w = lc.window{ bytes = 64, signals = 8, barriers = 4, timeout_ms = 2000 }
local b = lc.buffer(8)
local function try(f) local ok, err = pcall(f) print(ok, ok and "" or err) end
try(function() lc.plan(function() w:signal(p, 0); w:reduce_from(me, 0, w, 4, 8, "u32") end) end)
local early = lc.plan(function() w:signal(p, 7) end)
local ag = lc.allgather_persistent{ window = w, algo = "ring" }
try(function() lc.plan(function() w:signal(p, 7) end) end)
try(function() lc.plan(function() w:barrier(3) end) end)
try(function() early:run() end)
ag:destroy()
local q = lc.plan(function() w:put_signal(p, me * 8, b, 0, 8, 0); w:wait_signal(0, ">=", 1); w:barrier(0) end)
q:run{ times = 2 }; w:sync(); lc.barrier()
w:reset_signals(); w:sync(); lc.barrier()
try(function() q:run() end)
try(function() q:verify{} end)
`)
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v\n%s", r, x.err, x.out)
		}
		for _, want := range []string{
			"w:reduce_from: bad argument 'dst' (8 bytes at offset 4 overlap the source (offset 0 of the same window))",
			"w:signal: bad argument 'sig' (signal slot 7 is reserved by the persistent all-gather",
			"w:barrier: bad argument 'id' (barrier slot 3 is reserved by the persistent all-gather",
			"uses signal slot 7 (op signal at test.lua:7), which the persistent all-gather on window 0 made after it owns",
			"was recorded before w:reset_signals() at test.lua:15",
		} {
			if !strings.Contains(x.out, want) {
				t.Errorf("rank %d: no %q in\n%s", r, want, x.out)
			}
		}
		if strings.Count(x.out, "was recorded before w:reset_signals()") != 2 {
			t.Errorf("rank %d: p:run and p:verify should both refuse\n%s", r, x.out)
		}
	}
}

// What the reference promises of small things: help names an entry only
// under its own receiver, ag:protocol is refused after ag:destroy, and
// p:run's times names its range.
func TestDocPromises(t *testing.T) {
	reg := NewRegistry()
	if _, ok := reg.Help("b:put"); ok {
		t.Error(`help("b:put") found an entry: buffers have no put`)
	}
	for _, name := range []string{"window:put", "put", "w.put"} {
		if e := reg.Lookup(name); e == nil || e.Name != "w:put" {
			t.Errorf("Lookup(%q) = %v, want w:put", name, e)
		}
	}
	res := runLua(t, 1, `
local w = lc.window{ bytes = 4096 }
local ag = lc.allgather_persistent{ window = w }
ag:destroy()
print(pcall(function() return ag:protocol(64) end))
local q = lc.plan(function() w:fence() end)
print(pcall(function() q:run{ times = -1 } end))
print(pcall(function() q:run{ times = 2^31 + 1 } end))
`)
	out := res[0].out
	for _, want := range []string{"ag:protocol: the all-gather was destroyed", "bad argument 'times' (-1: want 1..2^31)", "bad argument 'times' (2147483649: want 1..2^31)"} {
		if res[0].err != nil || !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s (%v)", want, out, res[0].err)
		}
	}
}

// p:verify's ok holds for what it claims: an all-reduce whose ranks reduce
// with different operations is not one; barrier_peer with the rank itself
// (which does nothing) completes no put, so overwriting the put's source
// after it is a race; a fence orders a put before later signals, not
// before the issuer's next put into the same bytes (a barrier does); and
// a counter wait completes only the puts whose counts it could not do
// without (those before a reset that may still land count).
func TestVerifyClaims(t *testing.T) {
	res := runLua(t, 2, `
local me, peer = lc.rank, 1 - lc.rank
local n = 64
local w = lc.window{ bytes = 2 * n }
local p = lc.plan(function()
  w:barrier(0); w:put_signal(peer, n, w, 0, n, 0, 1, "add")
  w:wait_signal_from(peer, 0, ">=", 1); w:flush()
  w:reduce(w, 0, w, n, n, "i32", me == 0 and "sum" or "max"); w:barrier(0)
end)
print("mixed", p:verify{ collective = "allreduce", n = n }.summary)
local a = lc.buffer(n)
local q = lc.plan(function()
  w:barrier(0); w:put(peer, 0, a, 0, n); w:barrier_peer(me, 0); a:fill("const", 7); w:barrier(0)
end)
print("self", q:verify{}.summary)
local b = lc.buffer(n)
for _, sep in ipairs{ "fence", "barrier" } do
  local f = lc.plan(function()
    w:barrier(0); w:put(peer, 0, a, 0, n)
    if sep == "fence" then w:fence() else w:barrier(0) end
    w:put(peer, 0, b, 0, n); w:flush(); w:barrier(0)
  end)
  print(sep, f:verify{}.ok)
end
-- Counted puts complete in no set order: one count is either put's.
local wc = lc.window{ bytes = 2 * n }
local first = lc.plan(function()
  wc:barrier(0); wc:put_counter(peer, 0, a, 0, n, 0, 1); wc:put_counter(peer, n, b, 0, n, 0, 1)
  wc:wait_counter(peer, 0, ">=", 1); a:fill("const", 7); wc:wait_counter(peer, 0, ">=", 2); wc:barrier(0)
end)
print("counted one", first:verify{}.ok)
local wd = lc.window{ bytes = 2 * n }
local both = lc.plan(function()
  wd:barrier(0); wd:put_counter(peer, 0, a, 0, n, 0, 1); wd:put_counter(peer, n, b, 0, n, 0, 1)
  wd:wait_counter(peer, 0, ">=", 2); a:fill("const", 7); b:fill("const", 8); wd:barrier(0)
end)
print("counted both", both:verify{}.ok)
local we = lc.window{ bytes = 2 * n }
local reset = lc.plan(function()
  we:barrier(0); we:put_counter(peer, 0, a, 0, n, 0, 1); we:reset_counter(peer, 0); we:put_counter(peer, n, b, 0, n, 0, 1)
  we:wait_counter(peer, 0, ">=", 1); b:fill("const", 7); we:barrier(0)
end)
print("after reset", reset:verify{}.ok)
`)
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v", r, x.err)
		}
		for _, want := range []string{"mixed\t1 problem; first: postcondition: rank 1, op 5 (reduce at test.lua:8)", "reduces i32 with max where rank 0's reduce",
			"self\t", "race:", "fence\tfalse", "barrier\ttrue", "counted one\tfalse", "counted both\ttrue", "after reset\tfalse"} {
			if !strings.Contains(x.out, want) {
				t.Errorf("rank %d: no %q in\n%s", r, want, x.out)
			}
		}
	}
}
