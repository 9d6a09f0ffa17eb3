package luabind

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

var update = flag.Bool("update", false, "rewrite golden files and docs/lua-api.md")

type rankResult struct {
	out string
	err error
}

// runLua runs the same chunk on n in-process ranks over real shared memory.
func runLua(t *testing.T, n int, code string) []rankResult {
	t.Helper()
	return runLuaWith(t, n, code, "test.lua", 3*time.Second)
}

// runLuaWith is runLua with the chunk's name and the ranks' timeout.
func runLuaWith(t *testing.T, n int, code, name string, timeout time.Duration) []rankResult {
	t.Helper()
	return runLuaRanks(t, n, code, name, timeout, nil)
}

// runLuaRanks runs code on n in-process ranks; after, when set, is called
// with each rank's state once the chunk ran there, before the rank closes.
// It fails the test for any segment still mapped afterwards.
func runLuaRanks(t *testing.T, n int, code, name string, timeout time.Duration, after func(r int, s *State)) []rankResult {
	t.Helper()
	g := inproc.NewGroup(n)
	job := enginetest.JobID("lt")
	res := make([]rankResult, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			comm, err := enginetest.OpenInProc(ctx, g, i, job, engine.Options{Timeout: timeout})
			if err != nil {
				res[i].err = err
				return
			}
			var out bytes.Buffer
			s := New(comm, &out)
			s.Ctx = ctx
			err = s.Run([]byte(code), name, nil)
			if err == nil {
				err = comm.Sync(ctx)
			}
			if err == nil && after != nil {
				after(i, s)
			}
			_ = comm.Close(err)
			s.Close()
			res[i] = rankResult{out: out.String(), err: err}
		}(i)
	}
	wg.Wait()
	for _, m := range transport.MappedSegments(job) {
		t.Errorf("segment still mapped: %s", m)
	}
	return res
}

func mustAllOK(t *testing.T, res []rankResult) {
	t.Helper()
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v\noutput:\n%s", r, x.err, x.out)
		}
	}
}

func TestTourRunsEverywhere(t *testing.T) {
	src, name, err := LoadScript(DefaultScript)
	if err != nil {
		t.Fatal(err)
	}
	if name != DefaultScript {
		t.Fatalf("name %q", name)
	}
	for _, n := range []int{2, 4} {
		res := runLua(t, n, string(src))
		mustAllOK(t, res)
		if !strings.Contains(res[0].out, "tour done") {
			t.Fatalf("n=%d: rank 0 output lacks 'tour done':\n%s", n, res[0].out)
		}
	}
}

func TestLibrarySchedules(t *testing.T) {
	code := `
local lc = require("luacoll")
local ag, a2a, bar = require("allgather"), require("lib.alltoall"), require("barrier")
local n = 1000003 % 4096 + 13   -- an odd size
local w = lc.window{ bytes = n * lc.size }
for iter = 1, 5 do
  local src = lc.buffer(n)
  src:fill("rand", iter * 100 + lc.rank)
  if iter % 2 == 0 then ag.ring(w, src, 0, n) else ag.direct(w, src, 0, n) end
  for r = 0, lc.size - 1 do
    local ref = lc.buffer(n); ref:fill("rand", iter * 100 + r)
    assert(w:buffer():equal(ref, r * n, 0, n), ("iter %d chunk %d"):format(iter, r))
    ref:free()
  end
  src:free()
  bar.dissemination(w)
end
-- in place
w:buffer():fill("const", 0)
local mine = lc.buffer(n); mine:fill("const", lc.rank + 1)
w:put(lc.rank, lc.rank * n, mine, 0, n)
ag.ring(w, w, lc.rank * n, n)
for r = 0, lc.size - 1 do
  assert(w:buffer():read(r * n, 1):byte() == r + 1, "in place chunk " .. r)
end
-- all-to-all: chunk j of rank r holds r*16+j
local src = lc.buffer(n * lc.size)
for j = 0, lc.size - 1 do src:write(j * n, string.rep(string.char(lc.rank * 16 + j), n)) end
local w2 = lc.window{ bytes = n * lc.size }
a2a.pairwise(w2, src, 0, n)
w2:sync()
for r = 0, lc.size - 1 do
  assert(w2:buffer():read(r * n, 1):byte() == r * 16 + lc.rank, "a2a chunk " .. r)
end
w:free(); w2:free()
print("ok")
`
	for _, n := range []int{2, 3, 4} {
		mustAllOK(t, runLua(t, n, code))
	}
}

// lib timing: every rank gets rank 0's time of a replay, a positive
// number; the plan's replays ran (the counter the plan adds to counts
// them: 3 warm-up replays and rounds x times timed ones, with calls too).
func TestLibraryTiming(t *testing.T) {
	code := `
local lc = require("luacoll")
local timing = require("timing")
local w = lc.window{ bytes = 64, counters = 1 }
local src = lc.buffer(64)
local p = lc.plan(function(w, src) w:put_counter(lc.rank, 0, src, 0, 64, 0) end, w, src)
local s = timing.median(w, p, 4, 3)
local once = timing.once(w, p, 2, true)
w:sync()
assert(s > 0 and once > 0, "times " .. s .. ", " .. once)
local all = lc.allgather(s)
for r = 1, #all do assert(all[r] == all[1], "rank " .. (r - 1) .. " got another time") end
assert(w:read_counter(lc.rank, 0) == 3 + 3 * 4 + 2, "replays: " .. w:read_counter(lc.rank, 0))
print("ok")
`
	for _, n := range []int{2, 3} {
		mustAllOK(t, runLua(t, n, code))
	}
}

// badCalls lists calls the contract says must be refused, and the argument
// the error must name.
var badCalls = []struct{ code, want string }{
	{`w:put(9, 0, b, 0, 8)`, "'peer'"},
	{`w:put(-1, 0, b, 0, 8)`, "'peer'"},
	{`w:put(0, 1020, b, 0, 8)`, "'n'"},
	{`w:put(0, 2000, b, 0, 0)`, "'dst_off'"},
	{`w:put(0, 0, b, 60, 8)`, "'n'"},
	{`w:put(0, 0, b, 65, 0)`, "'src_off'"},
	{`w:put(0, 0, 5, 0, 8)`, "'src'"},
	{`w:put(0, 0.5, b, 0, 8)`, "'dst_off'"},
	{`w:put(0, 2^53 + 2, b, 0, 8)`, "2^53"},
	{`w:get(0, 0, nil, 0, 8)`, "'dst'"},
	{`w:signal(0, 8)`, "'sig'"},
	{`w:signal(0, 0, "mul")`, "'op'"},
	{`w:signal(0, 0, "add", -1)`, "'value'"},
	{`w:wait_signal(0, "=>", 1)`, "'cmp'"},
	{`w:wait_signal(99, ">=", 1)`, "'sig'"},
	{`w:wait_counter(0, 8, ">=", 1)`, "'ctr'"},
	{`w:barrier(4)`, "'id'"},
	{`w:put_signal(0, 0, b, 0, 8, 0, 1, "xor")`, "'op'"},
	{`w:read_signal_from(7, 0)`, "'peer'"},
	{`b:fill("zeros")`, "'kind'"},
	{`b:fill("const", 300)`, "'arg'"},
	{`b:read(60, 8)`, "'n'"},
	{`b:set_u32(0, 2^32)`, "'v'"},
	{`lc.buffer(-1)`, "'nbytes'"},
	{`lc.buffer("x")`, "'nbytes'"},
	{`f:put(0, 0, b, 0, 8)`, "freed"},
	{`w:put(0, 0, fb, 0, 8)`, "'src'"},
	{`fb:size()`, "freed"},
	{`w.put(0, 0, b, 0, 8)`, "with a colon"},
	{`lc.window{ bytes = 8, signal = 2 }`, "'signal'"},
	{`lc.window{ signals = 2 }`, "'bytes'"},
	{`lc.window{ bytes = 8, timeout_ms = 0 }`, "'timeout_ms'"},
	{`lc.window{ bytes = 8, path = "fast" }`, "'path'"},
	{`lc.window{ bytes = 8, ipc = "posix" }`, "bad argument 'ipc' (unknown value \"posix\""},
	{`lc.window{ bytes = 8, ipc = 1 }`, "bad argument 'ipc' (string expected, got number)"},
	{`lc.allgather(function() end)`, "'v'"},
}

func TestBadInputNamesTheArgument(t *testing.T) {
	var b strings.Builder
	b.WriteString(`local lc = require("luacoll")
local w = lc.window{ bytes = 1024 }
local f = lc.window{ bytes = 64 }
f:free()
local b = lc.buffer(64)
local fb = lc.buffer(8); fb:free()
local failures = {}
`)
	for i, c := range badCalls {
		fmt.Fprintf(&b, "do local ok, err = pcall(function() %s end)\n", c.code)
		fmt.Fprintf(&b, "  if ok then failures[#failures+1] = %q .. ': accepted' elseif not string.find(err, %q, 1, true) or not string.find(err, 'rank ' .. lc.rank, 1, true) or not string.find(err, 'test.lua:', 1, true) then failures[#failures+1] = %q .. ': ' .. err end end\n",
			fmt.Sprint(i)+" "+c.code, c.want, fmt.Sprint(i)+" "+c.code)
	}
	b.WriteString(`
-- after all those errors the window still works
local peer = (lc.rank + 1) % lc.size
b:fill("iota", 5)
w:put_signal(peer, 0, b, 0, 64, 0)
w:wait_signal(0, ">=", 1)
w:sync()
assert(w:buffer():get_u32(0) == 5)
assert(#failures == 0, table.concat(failures, "\n"))
w:free()
`)
	mustAllOK(t, runLua(t, 2, b.String()))
}

func TestWaitTimeoutIsRaisedBySync(t *testing.T) {
	res := runLua(t, 2, `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 200 }
w:wait_signal(3, ">=", 1)
local ok, err = pcall(function() w:sync() end)
assert(not ok)
assert(err:find("timed out", 1, true), err)
assert(err:find("sig 3", 1, true), err)
assert(err:find(">= 1", 1, true), err)
assert(err:find("last value seen 0", 1, true), err)
assert(err:find("test.lua:4", 1, true), err)
w:free()
print("ok")
`)
	mustAllOK(t, res)
}

func TestCollectiveMismatchFailsEveryRank(t *testing.T) {
	res := runLua(t, 3, `
local lc = require("luacoll")
if lc.rank == 1 then lc.window{ bytes = 128 } else lc.window{ bytes = 64 } end
`)
	for r, x := range res {
		if x.err == nil || !strings.Contains(x.err.Error(), "differs across ranks") ||
			!strings.Contains(x.err.Error(), "bytes=128") || !strings.Contains(x.err.Error(), "ranks 0,2") {
			t.Errorf("rank %d: %v", r, x.err)
		}
	}
}

func TestAllGatherValues(t *testing.T) {
	mustAllOK(t, runLua(t, 3, `
local lc = require("luacoll")
local all = lc.allgather({ r = lc.rank, s = "x\0y" .. lc.rank, t = { 1, 2, { deep = true } }, big = 2^53 })
assert(#all == lc.size)
for i = 1, lc.size do
  assert(all[i].r == i - 1 and all[i].s == "x\0y" .. (i - 1) and all[i].t[3].deep == true and all[i].big == 2^53)
end
assert(lc.allgather(nil)[2] == nil)
assert(lc.allgather(lc.rank == 0)[1] == true)
`))
}

// lc.info() has the contract's keys: backend, devices, transports per peer
// and versions (on the host backend: the host's memory, no libraries).
func TestInfo(t *testing.T) {
	mustAllOK(t, runLua(t, 2, `
local lc = require("luacoll")
local i = lc.info()
assert(i.backend == "host" and i.device == "host" and i.rank == lc.rank and i.size == 2, "backend/device/rank")
assert(#i.devices == 1 and i.devices[1].name == "host" and i.devices[1].mine == true, "devices")
assert(i.devices[1].model == nil and i.devices[1].memory_bytes == nil, "host device has no model")
assert(#i.transports == 2 and i.transports[lc.rank + 1] == "self" and i.transports[2 - lc.rank] == "shm", "transports")
assert(i.versions.luacoll ~= nil and i.versions.lua:find("Lua") and i.versions.nccl == nil, "versions")
assert(i.multicast == "not supported" and i.devices[1].multicast == "not supported", "multicast")
assert(i.mps == false and i.mps_daemon == nil, "mps")
assert(type(i.rendezvous) == "string", "rendezvous")
`))
}

func TestMPSOn(t *testing.T) {
	for _, c := range []struct {
		driver string
		daemon bool
		want   bool
	}{{"on", false, true}, {"on", true, true}, {"off", true, false}, {"off", false, false},
		{"unknown", true, true}, {"unknown", false, false}} {
		if got := mpsOn(c.driver, c.daemon); got != c.want {
			t.Errorf("mpsOn(%q, %v) = %v, want %v", c.driver, c.daemon, got, c.want)
		}
	}
}

// The ipc option is accepted on the host backend, whose windows are shared
// memory whatever it says, so a script naming it runs on both backends.
func TestIPCOptionOnHost(t *testing.T) {
	mustAllOK(t, runLua(t, 2, `
local lc = require("luacoll")
local peer = 1 - lc.rank
for _, ipc in ipairs({ "auto", "legacy", "vmm" }) do
  local w = lc.window{ bytes = 64, ipc = ipc }
  local b = lc.buffer(8); b:set_u64(0, 1000 + lc.rank)
  w:put_signal(peer, 0, b, 0, 8, 0)
  w:wait_signal(0, ">=", 1)
  w:sync()
  assert(w:buffer():get_u64(0) == 1000 + peer, ipc)
  b:free(); w:free()
end
`))
}

func TestHelpAndDocsComeFromTheRegistry(t *testing.T) {
	reg := NewRegistry()
	md := reg.Markdown()
	for _, e := range reg.Entries() {
		if e.Doc == "" {
			t.Errorf("%s has no doc string", e.Name)
		}
		if !strings.Contains(md, "`"+e.Signature()+"`") {
			t.Errorf("docs lack %s", e.Signature())
		}
	}
	res := runLua(t, 1, `help("w:put") help()`)
	mustAllOK(t, res)
	if !strings.Contains(res[0].out, "w:put(peer, dst_off, src, src_off, n)") || !strings.Contains(res[0].out, "lc.window") {
		t.Fatalf("help output:\n%s", res[0].out)
	}
	if *update {
		if err := os.WriteFile("../docs/lua-api.md", []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile("../docs/lua-api.md")
	if err != nil || string(committed) != md {
		t.Errorf("docs/lua-api.md is stale: run `make docs` (%v)", err)
	}
}

// FuzzLuaArgs feeds arbitrary values to window and buffer calls: the call
// must either succeed or raise a Lua error, never panic or corrupt state.
func FuzzLuaArgs(f *testing.F) {
	f.Add("put", 0.0, 8.0, 0.0, 8.0)
	f.Add("get", 1.0, -1.0, 1e300, 0.5)
	f.Add("signal", 0.0, 9e15, 0.0, 0.0)
	f.Add("wait_counter", 3.0, 0.0, 1.0, 2.0)
	g := inproc.NewGroup(1)
	comm, err := enginetest.OpenInProc(context.Background(), g, 0, enginetest.JobID("fz"), engine.Options{Timeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	var out bytes.Buffer
	s := New(comm, &out)
	if err := s.DoString(`lc = require("luacoll"); w = lc.window{ bytes = 256 }; b = lc.buffer(64)`, "setup"); err != nil {
		f.Fatal(err)
	}
	methods := map[string]string{
		"put": "w:put(0, %v, b, %v, %v)", "get": "w:get(0, %v, b, %v, %v)",
		"signal":       "w:signal(0, %v, 'add', %v) w:reset_signals() local _ = %v",
		"wait_counter": "w:read_counter(0, %v) local _ = %v + %v",
		"fill":         "b:fill('const', %v) local _ = %v + %v", "read": "b:read(%v, %v) local _ = %v",
		"checksum": "b:checksum(%v, %v) local _ = %v", "equal": "b:equal(w, %v, %v, %v)",
	}
	f.Fuzz(func(t *testing.T, m string, a, b, c, d float64) {
		tmpl, ok := methods[m]
		if !ok {
			return
		}
		_ = d
		code := fmt.Sprintf("pcall(function() "+tmpl+" end) w:sync()", a, b, c)
		if err := s.DoString(code, "fuzz"); err != nil {
			if strings.Contains(err.Error(), "syntax") || strings.Contains(err.Error(), "parse") {
				return
			}
			t.Fatalf("%s: %v", code, err)
		}
		if err := s.DoString(`w:put(0, 0, b, 0, 64) w:sync() assert(w:buffer():equal(b, 0, 0, 64))`, "check"); err != nil {
			t.Fatalf("after %s: %v", code, err)
		}
	})
}

// A window without timeout_ms times out after the job's --timeout, as
// its documentation says.
func TestWindowTimeoutDefaultIsTheJobs(t *testing.T) {
	e := NewRegistry().Lookup("lc.window")
	if !strings.Contains(e.Args, "timeout_ms=--timeout") || !strings.Contains(e.Doc, "the job's --timeout") {
		t.Errorf("lc.window's documentation does not say the default timeout: %s %s", e.Args, e.Doc)
	}
	res := runLuaWith(t, 1, `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
w:wait_signal(0, ">=", 1)
local ok, err = pcall(w.sync, w)
assert(not ok and tostring(err):find("timed out after 700ms", 1, true), tostring(err))
print("ok")`, "t.lua", 700*time.Millisecond)
	mustAllOK(t, res)
}

// ring, direct and hier (one node and two) with a staging area need no
// barrier: back to back calls
// (eager, then as two recorded plans run in turn) leave every chunk in
// place, with data that changes every call, at odd sizes, in place too.
func TestStagedSchedules(t *testing.T) {
	code := `
local lc = require("luacoll")
local ag = require("allgather")
local n = 1000003 % 4096 + 13
local size = lc.size
local w = lc.window{ bytes = 3 * n * size }
local opts = { staging = n * size, signal = 1 }
local src = lc.buffer(n)
local function check(iter)
  for r = 0, size - 1 do
    local ref = lc.buffer(n); ref:fill("rand", iter * 100 + r)
    assert(w:buffer():equal(ref, r * n, 0, n), ("iter %d chunk %d"):format(iter, r))
    ref:free()
  end
end
for iter = 1, 60 do
  src:fill("rand", iter * 100 + lc.rank)
  -- one rank late now and then, so that the others run a call ahead of it
  if lc.rank == 1 and iter % 4 == 1 then local t = lc.now(); while lc.now() - t < 0.003 do end end
  local two = { staging = opts.staging, signal = 1, nodes = size % 2 == 0 and 2 or 1 }
  if iter % 3 == 0 then ag.ring(w, src, 0, n, opts)
  elseif iter % 3 == 1 then ag.direct(w, src, 0, n, opts)
  else ag.hier(w, src, 0, n, iter % 2 == 0 and opts or two) end
  w:sync()
  check(iter)
end
-- in place
for iter = 61, 70 do
  local mine = lc.buffer(n); mine:fill("rand", iter * 100 + lc.rank)
  w:put(lc.rank, lc.rank * n, mine, 0, n); w:sync(); mine:free()
  ag.ring(w, w, lc.rank * n, n, opts)
  w:sync()
  check(iter)
end
-- plans, on the window the eager calls above signalled on (the verifier
-- starts its rows from what they sent). A plan of one staged call would
-- reuse its staging half at every replay: the verifier finds the race; a
-- plan of two calls alternates and passes.
for _, f in ipairs({ ag.direct, ag.ring, ag.hier }) do
  local one = lc.plan(f, w, src, 0, n, opts)
  local rep = one:verify{ collective = "allgather", window = w, n = n }
  assert(not rep.ok and rep.summary:find("race"), "one staged call replayed: " .. rep.summary)
  one:free()
  local p = lc.plan(function(...) f(...); f(...) end, w, src, 0, n, opts)
  rep = p:verify{ collective = "allgather", window = w, n = n }
  assert(rep.ok, rep.summary)
  for iter = 100, 160 do
    src:fill("rand", iter * 100 + lc.rank)
    p:run()
    w:sync()
    check(iter)
  end
  p:free()
end
w:free()
print("ok")
`
	for _, n := range []int{2, 3, 4} {
		mustAllOK(t, runLua(t, n, code))
	}
}

// lc.nodes: one host is one node of every rank, in order; it asks no
// other rank, so a plan's body may call it.
func TestNodes(t *testing.T) {
	res := runLua(t, 3, `
local lc = require("luacoll")
local t = lc.nodes()
assert(#t.groups == 1 and #t.groups[1] == lc.size, "one node of every rank")
for i, r in ipairs(t.groups[1]) do assert(r == i - 1, "ranks in order") end
assert(t.node == 1 and t.local_index == lc.rank + 1, "this rank's place")
local w = lc.window{ bytes = 64 }
local p = lc.plan(function() assert(#lc.nodes().groups == 1); w:fence() end)
p:free()
w:free()
print("ok")
`)
	for r, x := range res {
		if x.err != nil || !strings.Contains(x.out, "ok") {
			t.Fatalf("rank %d: %v\n%s", r, x.err, x.out)
		}
	}
}
