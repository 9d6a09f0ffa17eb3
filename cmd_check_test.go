package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

const checkGood = `
local lc = require("luacoll")
local ag = require("allgather")
local n = tonumber(arg[1] or "1000")
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
for _, algo in ipairs{ "ring", "direct" } do
  local p = lc.plan(ag[algo], w, src, 0, n)
  assert(p:verify{ collective = "allgather", n = n, src = src }.ok)
  p:run{ times = 10 }
  assert(p:info().mode == "check" and p:info().replays == 0)
end
`

// luacoll check verifies every plan of a script and runs none: a good
// script at several sizes, one whose plan deadlocks (named with its rank
// and line), one whose p:verify fails, and bad usage.
func TestCheckCommand(t *testing.T) {
	good := writeScript(t, checkGood)
	for _, n := range []string{"1", "3", "16"} {
		before := shmLeftovers(t)
		r := luacoll(t, nil, "check", good, "-n", n, "--", "333")
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("2 plans verified at %s ranks, no problems", n)) ||
			!strings.Contains(r.stdout, "plan 2 (") || !strings.Contains(r.stdout, "verified as allgather: ok") {
			t.Fatalf("-n %s: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		}
		checkCleanSettled(t, before)
	}
	stuck := writeScript(t, `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local p = lc.plan(function()
  w:signal((lc.rank + 1) % lc.size, 0)
  w:wait_signal_from((lc.rank + 1) % lc.size, 0, ">=", 1) -- waits on the wrong neighbour
end)
print("not reached")
`)
	r := luacoll(t, nil, "check", "-n", "3", stuck)
	if r.code != 1 || strings.Contains(r.stdout, "not reached") || !strings.Contains(r.stdout, "3 problems") ||
		!strings.Contains(r.stdout, "deadlock: rank 2, op 2 (wait_signal_from at "+stuck+":6): blocked: waits for signal 0 from rank 0 >= 1, which is 0") ||
		!strings.Contains(r.stderr, "failed verification") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wrong := writeScript(t, strings.Replace(checkGood, `collective = "allgather", n = n, src = src`, `collective = "alltoall", n = n`, 1)+"\n")
	r = luacoll(t, nil, "check", "-n", "2", wrong)
	if r.code != 1 || !strings.Contains(r.stdout, "verified as alltoall:") || !strings.Contains(r.stdout, "postcondition:") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A source too short for the collective named is an argument error.
	short := writeScript(t, strings.Replace(checkGood, `collective = "allgather"`, `collective = "alltoall"`, 1)+"\n")
	r = luacoll(t, nil, "check", "-n", "2", short)
	if r.code != 1 || !strings.Contains(r.stderr, "p:verify: bad argument 'n' (2000 bytes at offset 0 run past the end of buffer b1 of rank") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"check"}, {"check", "-n", "0", good}, {"check", "no-such.lua"}, {"check", good, "--bogus"}} {
		if r := luacoll(t, nil, args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := luacoll(t, nil, "check", "--help"); r.code != 0 || !strings.Contains(r.stdout, "No plan is replayed") {
		t.Errorf("help: %d %q", r.code, r.stdout)
	}
}

// TestCheckEndedRanks: under check, as under run, a wait that only ranks
// whose scripts ended (or that left with os.exit(0)) could satisfy fails
// at once naming them; and a rank that fails while the others wait at
// the teardown meeting ends the check (it waited for ever: that meeting
// has no time limit, and the in-process ranks' Fail did not reach it).
func TestCheckEndedRanks(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`if lc.rank == 1 then os.exit(0) elseif lc.rank == 2 then return end
w:wait_signal_from(1, 0, ">=", 1)`, "can never hold: rank 1 has ended (exited early with os.exit(0) at %s:3) and writes nothing more"},
		{`if lc.rank > 0 then return end
w:wait_signal(0, ">=", 2)`, "can never hold: rank 1 has ended (its script ended) and writes nothing more"},
		{`if lc.rank > 0 then return end
w:wait_counter(1, 0, ">=", 1)`, "wait_counter(peer 1, ctr 0) >= 1 (enqueued at %s:4): timed out after 1s"},
	} {
		s := writeScript(t, "local lc = require(\"luacoll\")\nlocal w = lc.window{ bytes = 64, timeout_ms = 1000 }\n"+c.body+"\nw:sync()")
		r := luacoll(t, nil, "check", "-n", "3", "--timeout", "30s", s)
		want := strings.ReplaceAll(c.want, "%s", s)
		if r.code != 1 || !strings.Contains(r.stderr, want) || r.took > 20*time.Second {
			t.Errorf("exit %d after %v, want 1 soon and %q\n%s", r.code, r.took, want, r.stderr)
		}
	}
}

// A staged schedule alternates between two staging halves: check verifies
// its two calls recorded as one plan (p:verify{calls = 2}: every rank, not
// only rank 0, takes the option), and a plan of one call, replayed back
// to back alone, fails with a hint saying so.
func TestCheckCalls(t *testing.T) {
	script := writeScript(t, `
local lc = require("luacoll")
local rs = require("reduce_scatter")
local n = 64 * lc.size
local w = lc.window{ bytes = 4 * lc.size * lc.size * n + 64 }
local calls = tonumber(arg[1])
local p = lc.plan(function(w) for _ = 1, calls do rs.push(w, n) end end, w)
local rep = p:verify{ collective = "reduce_scatter", window = w, n = n, calls = calls }
print(lc.rank, rep.summary)
`)
	for _, n := range []string{"2", "4"} {
		r := luacoll(t, nil, "check", "-n", n, script, "--", "2")
		if r.code != 0 || !strings.Contains(r.stdout, "verified as reduce_scatter: ok") {
			t.Fatalf("-n %s, two calls: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		}
	}
	r := luacoll(t, nil, "check", "-n", "4", script, "--", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "race:") || !strings.Contains(r.stderr, "between replays of this plan back to back") {
		t.Fatalf("one call: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// bench allgather --plan: the schedule recorded once per size, verified,
// replayed; its data checked beside the built-in all-gather's; each row
// names the mode its plans replayed in.
func TestBenchAllgatherPlan(t *testing.T) {
	// lua:hier finds its nodes with lc.nodes(), which a recording allows.
	for _, algo := range []string{"lua:ring", "lua:direct", "lua:hier"} {
		r := luacoll(t, nil, "bench", "allgather", "-n", "3", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "10",
			"--algo", algo, "--plan", "--vs", "direct")
		if r.code != 0 || !strings.Contains(r.stdout, "(plan, mode host)") || !strings.Contains(r.stdout, "a recorded plan replayed") {
			t.Fatalf("%s: exit %d\n%s\n%s", algo, r.code, r.stdout, r.stderr)
		}
		rows := tableRows(r.stdout, 13) // then predicted (the shipped host model), its ratio, the mode
		if len(rows) != 3 {
			t.Fatalf("%d rows:\n%s", len(rows), r.stdout)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0][0] >= '1' && f[0][0] <= '9' && f[len(f)-1] != "host" {
				t.Errorf("%s: row %q: want the mode host last", algo, line)
			}
		}
		for _, f := range rows {
			if f[6] != "0" || f[9] != "0" {
				t.Errorf("wrong chunks: %v", f)
			}
			if p, err := strconv.ParseFloat(f[11], 64); err != nil || p <= 0 {
				t.Errorf("no prediction: %v", f)
			}
		}
	}
	r := luacoll(t, nil, "bench", "allgather", "--algo", "direct", "--plan")
	if r.code != 2 || !strings.Contains(r.stderr, "--plan: records a Lua schedule") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}

// tests/plan.lua (also a GPU suite step): plans of ring and direct at odd
// sizes, verified, replayed with every replay's data checked.
func TestPlanScript(t *testing.T) {
	for _, n := range []string{"2", "4"} {
		before := shmLeftovers(t)
		r := luacoll(t, nil, "run", "-n", n, "tests/plan.lua", "50")
		if r.code != 0 || !strings.Contains(r.stdout, "[0] plan: 6 passed, 0 failed") {
			t.Fatalf("-n %s: exit %d\nstdout:\n%s\nstderr:\n%s", n, r.code, r.stdout, r.stderr)
		}
		checkCleanSettled(t, before)
	}
}

// tests/plan_fail.lua (also a GPU suite step): a plan's unsatisfied wait
// fails every rank at the window's timeout, naming the op's line, and the
// window works on.
func TestPlanFailScript(t *testing.T) {
	before := shmLeftovers(t)
	r := luacoll(t, nil, "run", "-n", "3", "tests/plan_fail.lua")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] plan_fail: 1 passed, 0 failed") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkCleanSettled(t, before)
}

// checkCleanSettled is checkClean that lets segments which other jobs on
// the machine (tests of other packages running at the same time) are just
// creating go first: a job unlinks its segments as soon as every peer has
// mapped them.
func checkCleanSettled(t *testing.T, before []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	for try := 0; ; try++ {
		var left []string
		for _, s := range shmLeftovers(t) {
			if !seen[s] {
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			return
		}
		if try == 20 {
			t.Errorf("shared-memory segments left behind in /dev/shm: %v", left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Under check no replay runs, so assertions on what one would have left
// fail: check passes over them and says which, by line, with how often and
// the first message.
func TestCheckSkipsReplayAssertions(t *testing.T) {
	script := writeScript(t, `
local lc = require("luacoll")
local ag = require("allgather")
local n = 8
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
assert(lc.size > 0, "not skipped: no replay was skipped yet")
local p = lc.plan(ag.ring, w, src, 0, n)
for it = 1, 3 do
  src:set_u32(0, it)
  p:run()
  lc.sync()
  assert(w:buffer():get_u32(((lc.rank + 1) % lc.size) * n) == it, "chunk of iteration " .. it)
end
print("went on")
`)
	r := luacoll(t, nil, "check", "-n", "2", script)
	if r.code != 0 || !strings.Contains(r.stdout, "went on") ||
		!strings.Contains(r.stdout, "skipped 3 failed assertions, which test what replays would have left (check runs none), on rank 0:\n  "+script+":13 (3 times; first: chunk of iteration 1)") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Before any skipped replay an assertion still fails the script.
	early := writeScript(t, `assert(false, "early")`)
	if r := luacoll(t, nil, "check", "-n", "2", early); r.code != 1 || !strings.Contains(r.stderr, "early") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// os.exit in a script under check ends that rank's script, not the check:
// a non-zero status fails the check naming the rank and line; a status of
// 0 is the rank's end, and the others' failures and plans are still seen.
// With real ranks and with simulated ones alike.
func TestCheckOSExit(t *testing.T) {
	exitFails := writeScript(t, `
if lc.rank == 1 then os.exit(3) end
lc.barrier()
`)
	othersFail := writeScript(t, `
if lc.rank == 1 then os.exit(0) end
error("rank " .. lc.rank .. " fails")
`)
	stuck := writeScript(t, `
local w = lc.window{ bytes = 64 }
local p = lc.plan(function() w:wait_signal_from((lc.rank + 1) % lc.size, 0, ">=", 1) end)
if lc.rank ~= 0 then os.exit(0) end
`)
	fine := writeScript(t, `
local w = lc.window{ bytes = 64 }
local p = lc.plan(function() w:barrier() end)
p:free(); w:free()
lc.barrier()
if lc.rank ~= 0 then os.exit(0) end
print("rank 0 done")
`)
	// A rank that leaves or ends before a collective the others then
	// call (with a window left to tear down, too) fails it, naming the
	// rank, rather than hanging the check.
	for _, c := range []struct{ code, want string }{
		{"if lc.rank == 1 then os.exit(0) end; lc.barrier()", "rank 1 exited early with os.exit(0) at "},
		{"if lc.rank == 1 then return end; lc.barrier()", "rank 1 ended without error before it"},
		{"local w = lc.window{ bytes = 64 }; if lc.rank == 1 then return end; lc.barrier()", "rank 1 ended without error before it"},
	} {
		r := luacoll(t, nil, "check", "-n", "3", "--timeout", "5s", writeScript(t, c.code))
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want 1 with %q\n%s\n%s", c.code, r.code, c.want, r.stdout, r.stderr)
		}
	}
	for _, sim := range [][]string{nil, {"--simulate"}} {
		for _, c := range []struct {
			script string
			code   int
			want   string
		}{
			{exitFails, 1, "rank 1: exited early with os.exit(3) at "},
			{othersFail, 1, " fails"},
			{stuck, 1, "deadlock: rank 0, op 1 (wait_signal_from"},
			{fine, 0, "rank 0 done"},
		} {
			args := append(append([]string{"check", "-n", "3"}, sim...), c.script)
			r := luacoll(t, nil, args...)
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Errorf("%v: exit %d, want %d with %q\n%s\n%s", args, r.code, c.code, c.want, r.stdout, r.stderr)
			}
		}
	}
}

// The ranks wait for rank 0's verification as long as it takes, not the
// per-call timeout: here a verification of about half a second (on this
// kind of machine) under --timeout 100ms, over the real bootstrap.
func TestRunVerifyLongerThanTimeout(t *testing.T) {
	script := writeScript(t, `
local w = lc.window{ bytes = 64, signals = 64 }
local p = lc.plan(function()
  for i = 1, 400 do
    w:signal((lc.rank + 1 + (i % (lc.size - 1))) % lc.size, i % 64)
    w:wait_signal(i % 64, ">=", 0)
  end
  w:barrier(0)
end)
local rep = p:verify{ replays = 4 }
assert(rep.ok, rep.summary)
print("verified")`)
	r := luacoll(t, nil, "run", "-n", "4", "--timeout", "100ms", script)
	if r.code != 0 || strings.Count(r.stdout, "verified") != 4 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
