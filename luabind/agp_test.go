package luabind

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// runLuaAGP runs an all-gather test chunk (named agp.lua) on n ranks.
func runLuaAGP(t *testing.T, n int, code string) []rankResult {
	t.Helper()
	return runLuaWith(t, n, code, "agp.lua", 5*time.Second)
}

// TestAGPGathers: odd sizes, in place and out of place, 5 execs with
// changing data, every chunk checked.
func TestAGPGathers(t *testing.T) {
	for _, tc := range []struct{ ranks, n int }{{2, 1000003}, {4, 1000003}, {8, 100003}, {3, 1}} {
		t.Run(fmt.Sprintf("n%d_size%d", tc.ranks, tc.n), func(t *testing.T) {
			code := fmt.Sprintf(`
local lc = require("luacoll")
local n = %d
local w = lc.window{ bytes = n * lc.size + 5 }
local ag = lc.allgather_persistent{ window = w, algo = "auto" }
local info = ag:info()
assert(info.algo == "direct" and info.graph == false and info.algo_requested == "auto", "info")
assert(info.signal_slot == 7 and info.barrier_slot == 3, "slots " .. tostring(info.signal_slot) .. ", " .. tostring(info.barrier_slot))
assert(info.path:find("shm"), "path " .. info.path)
assert(ag:protocol(n) == "host", "protocol " .. ag:protocol(n))
local src = lc.buffer(n + 3)
local refs = {}
for r = 0, lc.size - 1 do refs[r] = lc.buffer(n) end
for iter = 1, 5 do
  local seed = function(r) return iter * 1000 + r end
  src:fill("rand", seed(lc.rank))
  if iter %% 2 == 0 then
    w:put(lc.rank, lc.rank * n, src, 3, n)       -- own chunk into place
    ag:exec(w, lc.rank * n, n)                   -- in place
  else
    ag:exec(src, 3, n)                           -- out of place, odd offset
  end
  for r = 0, lc.size - 1 do
    local ref = lc.buffer(n + 3); ref:fill("rand", seed(r))
    assert(w:buffer():equal(ref, r * n, 3, n), ("iter %%d chunk %%d"):format(iter, r))
    ref:free()
  end
end
ag:destroy()
print("agp ok")
`, tc.n)
			res := runLuaAGP(t, tc.ranks, code)
			mustAllOK(t, res)
			for r, x := range res {
				if !strings.Contains(x.out, "agp ok") {
					t.Fatalf("rank %d output:\n%s", r, x.out)
				}
			}
		})
	}
}

// TestAGPErrors: bad arguments are refused naming the argument, and use
// after destroy is an error.
func TestAGPErrors(t *testing.T) {
	code := `
local lc = require("luacoll")
local function fails(want, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error containing " .. want)
  assert(tostring(err):find(want, 1, true), ("error %q lacks %q"):format(tostring(err), want))
end
local w = lc.window{ bytes = 100 * lc.size }
fails("'algo'", lc.allgather_persistent, { window = w, algo = "bogus" })
fails("'graph'", lc.allgather_persistent, { window = w, graph = true })
fails("--device cuda", lc.allgather_persistent, { window = w, graph = true })
fails("'windw'", lc.allgather_persistent, { windw = w })
fails("'window'", lc.allgather_persistent, { algo = "direct" })
fails("'window'", lc.allgather_persistent, { window = lc.buffer(8) })
local ag = lc.allgather_persistent{ window = w, algo = "pipeline" }
local info = ag:info()
assert(info.algo == "hier" and info.algo_requested == "pipeline", "pipeline is hier")
assert(info.nodes == 1 and info.ranks_per_node == lc.size, "one node of every rank")
fails("already has a persistent all-gather", lc.allgather_persistent, { window = w })
local src = lc.buffer(200)
fails("'n'", ag.exec, ag, src, 0, 101)
fails("'n'", ag.exec, ag, src, 150, 60)
fails("'src_off'", ag.exec, ag, src, 201, 1)
fails("'src_off'", ag.exec, ag, w, 1, 10)
fails("'src'", ag.exec, ag, 5, 0, 1)
fails("with a colon", ag.exec, src, src, 0, 1)
ag:exec(src, 0, 100)
ag:exec(src, 0, 0)
lc.sync()
ag:destroy()
assert(ag:info().state == "destroyed")
fails("used after destroy", ag.exec, ag, src, 0, 10)
fails("destroyed twice", ag.destroy, ag)
-- a new one on the same window continues the exec count
local ag2 = lc.allgather_persistent{ window = w }
for i = 1, 3 do
  src:fill("const", i + lc.rank)
  ag2:exec(src, 0, 100)
  for r = 0, lc.size - 1 do assert(w:buffer():read(r * 100, 1):byte() == i + r, "ag2 chunk") end
end
ag2:destroy()
print("errors ok")
`
	res := runLuaAGP(t, 2, code)
	mustAllOK(t, res)
}

// TestAGPReservesItsSlots: while an all-gather lives, the script's own
// signals, waits and barriers on its slots are refused with the reason
// (they would corrupt its tags); other slots work, reading works, and the
// slots are free again after destroy.
func TestAGPReservesItsSlots(t *testing.T) {
	res := runLuaAGP(t, 2, `
local lc = require("luacoll")
local function fails(want, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error containing " .. want)
  assert(tostring(err):find(want, 1, true), ("error %q lacks %q"):format(tostring(err), want))
end
local peer = 1 - lc.rank
local w = lc.window{ bytes = 64 * lc.size, signals = 4, barriers = 2 }
local src = lc.buffer(8)
local ag = lc.allgather_persistent{ window = w }
local sig = "bad argument 'sig' (signal slot 3 is reserved by the persistent all-gather on window 0 until ag:destroy(); free slots: 0..2)"
fails(sig, w.signal, w, peer, 3)
fails(sig, w.signal_all, w, 3)
fails(sig, w.put_signal, w, peer, 0, src, 0, 8, 3)
fails(sig, w.put_signal_counter, w, peer, 0, src, 0, 8, 3, 1, 0, 1)
fails(sig, w.wait_signal, w, 3, ">=", 1)
fails(sig, w.wait_signal_from, w, peer, 3, ">=", 1)
local bar = "bad argument 'id' (barrier slot 1 is reserved by the persistent all-gather on window 0 until ag:destroy(); free slots: 0..0)"
fails(bar, w.barrier, w, 1)
fails(bar, w.barrier_peer, w, peer, 1)
fails("w:reset_signals: the persistent all-gather on window 0 owns signal slot 3 until ag:destroy()", w.reset_signals, w)
w:signal(peer, 2); w:wait_signal(2, ">=", 1); w:barrier(0); w:sync()
assert(w:read_signal(3) == 0)
src:fill("const", lc.rank + 1)
ag:exec(src, 0, 8)
lc.sync()
-- (On the host the all-gather's tags live in its own private window.)
for r = 0, lc.size - 1 do assert(w:buffer():read(r * 8, 1):byte() == r + 1, "the all-gather's data") end
ag:destroy()
w:barrier(1); w:sync()
print("slots ok")
`)
	mustAllOK(t, res)
	for r, x := range res {
		if !strings.Contains(x.out, "slots ok") {
			t.Fatalf("rank %d output:\n%s", r, x.out)
		}
	}
}

// TestAGPSizeMismatch: ranks passing different n get a clear error as
// soon as the other's tag arrives, long before the window timeout (60 s
// here), not a hang.
func TestAGPSizeMismatch(t *testing.T) {
	start := time.Now()
	res := runLuaAGP(t, 2, `
local lc = require("luacoll")
local w = lc.window{ bytes = 1024, timeout_ms = 60000 }
local ag = lc.allgather_persistent{ window = w }
local src = lc.buffer(256)
ag:exec(src, 0, 64 + lc.rank)
local ok, err = pcall(lc.sync)
assert(not ok, "mismatch went unnoticed")
local other = 1 - lc.rank
local want = ("rank %d passed n=%d, this rank n=%d"):format(other, 64 + other, 64 + lc.rank)
assert(tostring(err):find("n differs across ranks", 1, true) and tostring(err):find(want, 1, true), tostring(err))
assert(tostring(err):find("seen as soon as that rank's tag arrived", 1, true), tostring(err))
ag:destroy()
print("mismatch ok")
`)
	mustAllOK(t, res)
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("mismatch took %v: the 60 s timeout, not the tag, ended it", d)
	}
}

// TestAGPBackToBack: 1000 execs enqueued back to back with changing data;
// a stream-ordered snapshot after each proves no exec's data overwrote the
// previous result early. With more ranks than cores the host streams'
// spin-waits cost ~25 ms an exec, so -n 4 runs 1000 only without -short.
func TestAGPBackToBack(t *testing.T) {
	for _, ranks := range []int{2, 4} {
		iters := 1000
		if ranks > runtime.NumCPU() && testing.Short() {
			iters = 100
		}
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			res := runLuaAGP(t, ranks, "local iters = "+fmt.Sprint(iters)+`
local lc = require("luacoll")
local n, size = 37, lc.size
local w = lc.window{ bytes = n * size }
local ag = lc.allgather_persistent{ window = w }
local src = lc.buffer(n)
local hist = lc.buffer(iters * size * n)
for i = 1, iters do
  src:fill("const", (i * 7 + lc.rank) % 256)
  if i % 3 == 0 then
    w:put(lc.rank, lc.rank * n, src, 0, n)
    ag:exec(w, lc.rank * n, n)
  else
    ag:exec(src, 0, n)
  end
  w:get(lc.rank, 0, hist, (i - 1) * size * n, size * n)
end
local got = hist:read(0, iters * size * n)
local parts = {}
for i = 1, iters do
  for r = 0, size - 1 do parts[#parts + 1] = string.rep(string.char((i * 7 + r) % 256), n) end
end
assert(got == table.concat(parts), "a snapshot differs")
ag:destroy()
print("b2b ok")
`)
			mustAllOK(t, res)
		})
	}
}
