package luabind

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// staleCode records an all-gather schedule (SCHEDULE), verifies it as the
// script of issue 33 did, then replays it one replay at a time with new
// source data each time and counts the chunks that are not this replay's.
// It prints "verify: <summary>" and "stale: <count>".
const staleCode = `
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local n = 64
local w = lc.window{ bytes = n * size }
local src = lc.buffer(n)
local function ag(w, src, off, n)
  SCHEDULE
end
local p = lc.plan(ag, w, src, 0, n)
local rep = p:verify{ collective = "allgather", window = w, n = n, src = src, replays = 4 }
if me == 0 then
  print("verify: " .. rep.summary)
  for _, pr in ipairs(rep.problems) do print("problem: " .. pr.kind .. " " .. pr.rank .. " " .. pr.line) end
end
local stale, iters = 0, tonumber(arg and arg[1]) or ITERS
local buf = w:buffer()
for it = 1, iters do
  src:set_u32(0, it * 100 + me)
  p:run{ times = 1 }
  lc.sync()
  -- now and then rank 0 reads late, as a slow reader would
  if me == 0 and it % 8 == 0 then local t = lc.now(); while lc.now() - t < 0.001 do end end
  for r = 0, size - 1 do
    if buf:get_u32(r * n) ~= it * 100 + r then stale = stale + 1 end
  end
end
print("stale: " .. stale)
p:free()
`

// The schedules of issue 33: the put of the own chunk, then a put_signal
// to every peer.
const (
	staleSends = `
  w:put(me, me * n, src, off, n)
  for i = 1, size - 1 do w:put_signal((me + i) % size, me * n, src, off, n, 0, 1, "add") end
`
	// one wait summing every peer's signal, no barrier (the issue's)
	staleSum = staleSends + `
  w:wait_signal(0, ">=", size - 1) -- WAIT
  w:flush()`
	// a wait per peer, and a barrier opening each call (as lib/allgather)
	staleFixed = `
  w:barrier(0)` + staleSends + `
  for i = 1, size - 1 do w:wait_signal_from((me - i) % size, 0, ">=", 1) end
  w:flush()`
)

// Variants: a wait per peer but no barrier (a peer a replay ahead writes
// its next chunk while this rank reads), and a closing barrier that shares
// the data's slot (its waits are met by the data signals already in, so it
// holds no one back).
const (
	stalePerPeer = staleSends + `
  for i = 1, size - 1 do w:wait_signal_from((me - i) % size, 0, ">=", 1) end -- WAIT
  w:flush()`
	// issue 33 expected a closing barrier to be enough; it is not: a rank
	// out of it first starts its next replay while a slower one reads
	staleClosing = stalePerPeer + `
  w:barrier(0)`
	staleSharedSlot = staleSends + `
  for i = 1, size - 1 do w:wait_signal_from((me - i) % size, 0, ">=", 1) end -- WAIT
  w:flush()
  require("barrier").dissemination(w, 0)`
)

func runStale(t *testing.T, schedule string, iters int) (verify string, problems []string, stale int) {
	t.Helper()
	code := strings.Replace(staleCode, "SCHEDULE", schedule, 1)
	code = strings.Replace(code, "ITERS", strconv.Itoa(iters), 1)
	res := runLua(t, 3, code)
	mustAllOK(t, res)
	for r, x := range res {
		for _, line := range strings.Split(x.out, "\n") {
			switch {
			case strings.HasPrefix(line, "verify: "):
				verify = strings.TrimPrefix(line, "verify: ")
			case strings.HasPrefix(line, "problem: "):
				problems = append(problems, strings.TrimPrefix(line, "problem: "))
			case strings.HasPrefix(line, "stale: "):
				k, err := strconv.Atoi(strings.TrimPrefix(line, "stale: "))
				if err != nil {
					t.Fatalf("rank %d: %q", r, line)
				}
				stale += k
			}
		}
	}
	return verify, problems, stale
}

// TestVerifyRefusesStaleSchedule: the all-gather of issue 33, whose sum
// wait lets a fast peer's signal of the next replay stand in for a slow
// peer's, really returns stale chunks on the host backend, and p:verify
// refuses it, naming the wait's line; the same sends with a wait per peer
// and an opening barrier verify ok and return none.
func TestVerifyRefusesStaleSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the schedules 2000 times")
	}
	waitLine := lineOf(t, strings.Replace(staleCode, "SCHEDULE", staleSum, 1), "-- WAIT")
	verify, problems, stale := runStale(t, staleSum, 2000)
	if !strings.Contains(verify, "problems") {
		t.Fatalf("the issue's schedule verified: %s", verify)
	}
	want := []string{fmt.Sprintf("stand-in 0 %d", waitLine), fmt.Sprintf("result 0 %d", waitLine)}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || p == w
		}
		if !found {
			t.Errorf("no problem %q in %q", w, problems)
		}
	}
	if stale == 0 {
		t.Errorf("no stale chunk in 3 x 2000 checked: the refused schedule did not show its fault this time")
	}
	t.Logf("issue schedule: %s; %d stale chunks of 18000", verify, stale)
	verify, problems, stale = runStale(t, staleFixed, 500)
	if !strings.HasPrefix(verify, "ok") || stale != 0 {
		t.Fatalf("the fixed schedule: %s %q, %d stale", verify, problems, stale)
	}
}

// w:reset_signals() between eager signals and a plan: the verifier starts
// the reset rows from what the inbox holds (the senders still count what
// the reset wiped), so a plan whose waits count from the reset verifies
// and runs; after replays of an earlier plan on those rows it reports that
// the new plan's waits will hang, and they do.
func TestVerifyAfterResetSignals(t *testing.T) {
	res := runLuaWith(t, 3, `
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local right, left = (me + 1) % size, (me - 1) % size
local w = lc.window{ bytes = 64, timeout_ms = 1500 }
local function hop(v) w:signal(right, 3, "add", 1); w:wait_signal_from(left, 3, ">=", v) end
-- eager use of slot 3, then a reset
w:signal(right, 3, "add", 5)
w:wait_signal_from(left, 3, ">=", 5)
w:sync(); lc.barrier()
w:reset_signals()
w:sync(); lc.barrier()
local p = lc.plan(hop, 1)
local rep = p:verify{ replays = 3 }
assert(rep.ok, "after a reset: " .. rep.summary)
p:run{ times = 3 }
w:sync()
assert(w:read_signal_from(left, 3) == 3, "replayed")
-- replays of p counted 3 on the rows; reset them and record a plan that
-- counts from zero again: its replays wait for 3 - 1 more than will come
-- (the ledger counts the 3 replayed, less the 1 that p's recording counted).
lc.barrier()
w:reset_signals()
w:sync(); lc.barrier()
local q = lc.plan(hop, 1)
rep = q:verify{}
assert(not rep.ok and rep.problems[1].kind == "reset" and rep.problems[1].message:find("wait for 2 signals more", 1, true), rep.summary)
q:run()
local ok, err = pcall(w.sync, w)
assert(not ok and tostring(err):find("timed out", 1, true), "the hang the verifier named: " .. tostring(err))
print("ok")
`, "reset.lua", 5*time.Second)
	mustAllOK(t, res)
	for r, x := range res {
		if !strings.Contains(x.out, "ok") {
			t.Fatalf("rank %d: %q", r, x.out)
		}
	}
}

// TestVerifyRefusesStaleVariants: the variants of issue 33's schedule
// where a missing barrier, a barrier that closes the replay but does not
// open the next, or a barrier on the data's slot lets a later replay's
// chunk in while a rank reads its result: refused at the wait that let it
// through, and the wrong chunks are real.
func TestVerifyRefusesStaleVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the schedules 3000 times")
	}
	for name, sched := range map[string]string{"per peer": stalePerPeer, "closing barrier": staleClosing, "shared slot": staleSharedSlot} {
		t.Run(name, func(t *testing.T) {
			waitLine := lineOf(t, strings.Replace(staleCode, "SCHEDULE", sched, 1), "-- WAIT")
			verify, problems, stale := runStale(t, sched, 3000)
			// the wait named is the data's, or the barrier's that shares its slot
			found := false
			for _, p := range problems {
				found = found || p == fmt.Sprintf("result 0 %d", waitLine) || (name == "shared slot" && strings.HasPrefix(p, "result 0 "))
			}
			if !strings.Contains(verify, "problems") || !found {
				t.Fatalf("not refused at line %d: %s %q", waitLine, verify, problems)
			}
			if stale == 0 {
				t.Errorf("no wrong chunk in 3 x 3000 checked: the refused schedule did not show its fault this time")
			}
			t.Logf("%s: %d wrong chunks of 27000", verify, stale)
		})
	}
}
