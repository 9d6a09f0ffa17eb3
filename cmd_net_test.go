package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tnet "github.com/luacoll/luacoll/transport/net"
)

func needUCX(t *testing.T) {
	t.Helper()
	if _, err := tnet.Load(); err != nil {
		t.Skipf("no UCX here (%v); apt-get install %s runs these tests", err, tnet.Package)
	}
}

// tmpLeftovers lists the logical nodes' directories in the temporary
// directory.
func tmpLeftovers() []string {
	return namesIn(os.TempDir(), func(n string) bool { return strings.HasPrefix(n, "luacoll-") && strings.Contains(n, "-node") })
}

func checkTmpClean(t *testing.T, before []string) {
	t.Helper()
	seen := setOf(before)
	for _, s := range tmpLeftovers() {
		if !seen[s] {
			t.Errorf("temporary directory left behind: %s", filepath.Join(os.TempDir(), s))
		}
	}
}

// --nodes splits the ranks into logical nodes: ranks of one node map each
// other, ranks of others are reached over UCX, and the window suite passes
// across them, leaving nothing behind.
func TestLogicalNodes(t *testing.T) {
	needUCX(t)
	shmBefore, tmpBefore := shmLeftovers(t), tmpLeftovers()
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local t = {}
for p = 0, lc.size - 1 do
  local kind, via = w:transport(p)
  t[#t+1] = p .. "=" .. kind .. (via and (" (" .. via .. ")") or "")
end
lc.log("%s %s dev=%s", os.getenv("TMPDIR") or "-", table.concat(t, " "), os.getenv("LUACOLL_DEVICE_INDEX") or "-")
w:free()`)
	r := luacoll(t, nil, "run", "-n", "4", "--nodes", "2", s)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for rank, want := range []string{"0=self 1=shm 2=net (ucx", "0=shm 1=self 2=net (ucx", "1=net (ucx: tcp/lo) 2=self 3=shm", "2=shm 3=self"} {
		line := ""
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "["+string(rune('0'+rank))+"] ") {
				line = l
			}
		}
		if !strings.Contains(line, want) || !strings.Contains(line, "-node"+string(rune('0'+rank/2))) {
			t.Errorf("rank %d: %q, want %q and its node's TMPDIR", rank, line, want)
		}
		// The logical nodes share the machine's GPUs: each rank picks
		// its device by its rank, not by its index within its node.
		if !strings.HasSuffix(line, " dev="+string(rune('0'+rank))) {
			t.Errorf("rank %d: %q, want its device index (its rank)", rank, line)
		}
	}
	for _, n := range []string{"2", "4"} {
		r = luacoll(t, nil, "run", "-n", n, "--nodes", "2", "tests/suite.lua")
		if r.code != 0 || !strings.Contains(r.stdout, "[0] suite: 10 passed, 0 failed") {
			t.Fatalf("suite, -n %s --nodes 2: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		}
	}
	r = luacoll(t, nil, "run", "-n", "3", "--nodes", "3", "tests/agp.lua")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] agp: 7 passed, 0 failed") {
		t.Fatalf("agp, -n 3 --nodes 3: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The built-in algorithms across two nodes of two ranks, each forced,
	// and auto, which stages small execs in two levels there.
	for _, algo := range []string{"ring", "hier", "direct", "auto"} {
		r = luacoll(t, nil, "run", "-n", "4", "--nodes", "2", "tests/agp.lua", "1", "auto", algo)
		if r.code != 0 || !strings.Contains(r.stdout, "[0] agp: 7 passed, 0 failed") {
			t.Fatalf("agp --algo %s, -n 4 --nodes 2: exit %d\n%s\n%s", algo, r.code, r.stdout, r.stderr)
		}
	}
	// A refused exec across the nodes: the peer's wait fails at once and
	// the next exec gathers the right data, staged (4 KiB a rank: no
	// guard barrier) or not (1 MiB).
	for _, n := range []string{"4096", "1048576"} {
		r = luacoll(t, nil, "run", "-n", "2", "--nodes", "2", "tests/agp_refused.lua", "", "", n)
		if r.code != 0 || !strings.Contains(r.stdout, "[0] agp_refused: 1 passed, 0 failed") {
			t.Fatalf("agp_refused, n %s, -n 2 --nodes 2: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		}
	}
	// Two ranks a node, staged in two levels: rank 3 waits for what rank
	// 2 forwards from rank 0, which refused; it sees the refusal at once.
	r = luacoll(t, nil, "run", "-n", "4", "--nodes", "2", "tests/agp_refused.lua", "", "", "4096")
	if r.code != 0 || !strings.Contains(r.stdout, "[0] agp_refused: 1 passed, 0 failed") {
		t.Fatalf("agp_refused, two-level staging, -n 4 --nodes 2: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "run", "-n", "2", "--nodes", "2", writeScript(t,
		`local lc = require("luacoll"); local w = lc.window{bytes = 1048576}; local ag = lc.allgather_persistent{window = w}; `+
			`print("staged up to " .. tostring(ag:info().staged_up_to)); ag:destroy(); w:free()`))
	if r.code != 0 || !strings.Contains(r.stdout, "[0] staged up to 65536") {
		t.Fatalf("staged execs across nodes: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "run", "-n", "4", "--nodes", "2", writeScript(t,
		`local lc = require("luacoll"); local w = lc.window{bytes = 65536}; local ag = lc.allgather_persistent{window = w}; local i = ag:info(); `+
			`print(("%s %d x %d, staged %s"):format(i.algo, i.nodes, i.ranks_per_node, i.staged)); ag:destroy(); w:free()`))
	if r.code != 0 || !strings.Contains(r.stdout, "[0] hier 2 x 2, staged two levels:") {
		t.Fatalf("auto on 2 nodes x 2 ranks: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checkClean(t, shmBefore)
	checkTmpClean(t, tmpBefore)
}

func TestLogicalNodesRefusesBadCounts(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-n", "2", "--nodes", "3"},
		{"run", "-n", "2", "--nodes", "0"},
		{"bench", "pingpong", "-n", "2", "--nodes", "5"},
	} {
		r := luacoll(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--nodes") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming --nodes", args, r.code, r.stderr)
		}
	}
}

// A whole logical node killed mid-wait: the other node's ranks stop within
// the window timeout naming a dead rank, and nothing is left in /dev/shm or
// the temporary directory.
func TestKilledNodeMidWait(t *testing.T) {
	killNode(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096, timeout_ms = 20000 }
local f = io.open(arg[1] .. "/pid" .. lc.rank, "w"); f:write(tostring(lc.rank)); f:close()
-- every rank has put to every other before the kill
local src = lc.buffer(64)
for p = 0, lc.size - 1 do w:put(p, 0, src, 0, 64) end
w:sync()
w:wait_signal(0, ">=", 1)
w:sync()`)
}

// The same with the ranks in a loop of the two-level all-gather across the
// nodes, every exec checked.
func TestKilledNodeMidAllGather(t *testing.T) {
	killNode(t, agKillScript(300000, `ag:info().algo == "hier"`))
}

// The same with execs small enough to be staged in two levels: the
// forwards of a dead node's chunks never come, and the survivors stop
// naming a dead rank rather than waiting on.
func TestKilledNodeMidStagedAllGather(t *testing.T) {
	killNode(t, agKillScript(4096, `ag:protocol(n) == "staged-hier"`))
}

// agKillScript is a loop of all-gathers of n bytes a rank, each checked,
// after asserting want (a Lua expression of ag and n) of what auto picks.
func agKillScript(n int, want string) string {
	return fmt.Sprintf(`local lc = require("luacoll")
local n = %d
local w = lc.window{ bytes = n * lc.size, timeout_ms = 20000 }
local ag = lc.allgather_persistent{ window = w }
assert(%s, "auto picks " .. tostring(ag:info().algo) .. ", " .. tostring(ag:protocol(n)))
local src, ref = lc.buffer(n), lc.buffer(n)
local f = io.open(arg[1] .. "/pid" .. lc.rank, "w"); f:write(tostring(lc.rank)); f:close()
for it = 1, 1000000 do
  src:fill("rand", it * 16 + lc.rank)
  ag:exec(src, 0, n)
  lc.sync()
  for r = 0, lc.size - 1 do
    ref:fill("rand", it * 16 + r)
    assert(w:buffer():equal(ref, r * n, 0, n), ("exec %%d: chunk %%d differs"):format(it, r))
  end
end`, n, want)
}

// killNode runs script on 4 ranks in 2 logical nodes, SIGKILLs both ranks
// of node 1 once they have written their pid files, and checks that the
// others stop within the timeout naming a dead rank, leaving nothing.
func killNode(t *testing.T, script string) {
	t.Helper()
	needUCX(t)
	shmBefore, tmpBefore := shmLeftovers(t), tmpLeftovers()
	dir := t.TempDir()
	s := writeScript(t, script)
	cmd := exec.Command(bin, "run", "-n", "4", "--nodes", "2", "--timeout", "20s", s, dir)
	cmd.Env = cleanEnv()
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var victims []int
	for len(victims) < 2 && time.Now().Before(deadline) {
		victims = victims[:0]
		for _, r := range []int{2, 3} {
			if _, err := os.Stat(filepath.Join(dir, "pid"+string(rune('0'+r)))); err == nil {
				if pid := findRank(t, cmd.Process.Pid, r); pid != 0 {
					victims = append(victims, pid)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(victims) < 2 {
		cmd.Process.Kill()
		t.Fatal("node 1's ranks never started")
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	for _, pid := range victims {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 137 {
		t.Fatalf("exit %v, want 137\n%s", err, e.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("others took %v to stop", d)
	}
	if !strings.Contains(e.String(), "rank 2 died") && !strings.Contains(e.String(), "rank 3 died") {
		t.Fatalf("stderr names neither rank of node 1:\n%s", e.String())
	}
	checkClean(t, shmBefore)
	checkTmpClean(t, tmpBefore)
	if kids := children(cmd.Process.Pid); len(kids) > 0 {
		t.Fatalf("processes left: %v", kids)
	}
}

// luacoll info names the UCX version and the transports it sees.
func TestInfoShowsTheNetwork(t *testing.T) {
	needUCX(t)
	r := luacoll(t, []string{"UCX_TLS=tcp"}, "info")
	if r.code != 0 || !strings.Contains(r.stdout, "network peers: UCX 1.") || !strings.Contains(r.stdout, "transports tcp/") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = luacoll(t, nil, "info", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"network": {`) || !strings.Contains(r.stdout, `"transport": "tcp"`) {
		t.Fatalf("--json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// Over the network a put from a get's destination starts after the get,
// in stream order: it moves the bytes the get brought (a get into a put's
// source waits for the put likewise), at sizes the network moves eagerly
// and by rendezvous, and the all-gather after a get gathers them too.
func TestNetGetThenPutInOrder(t *testing.T) {
	needUCX(t)
	s := writeScript(t, `local me, p = lc.rank, 1 - lc.rank
local N = tonumber(arg[1])
local w = lc.window{ bytes = 4 * N }
local c = lc.buffer(N)
w:buffer():fill("const", 7 + me)
w:sync(); lc.barrier()
if me == 0 then
  w:get(p, 0, c, 0, N)       -- c: rank 1's 8s
  w:put(p, N, c, 0, N)       -- back to rank 1 at N: 8s
  w:get(p, 0, c, 0, N)       -- WAR on c, then the same again
  w:put(p, 2 * N, c, 0, N)
end
w:sync(); lc.barrier()
if me == 1 then
  local a, b = w:buffer():read(N, N), w:buffer():read(2 * N, N)
  print("got", a == string.rep("\8", N), b == string.rep("\8", N))
end`)
	for _, n := range []string{"64", "8192", "1048576"} {
		r := luacoll(t, nil, "run", "-n", "2", "--nodes", "2", s, n)
		if r.code != 0 || !strings.Contains(r.stdout, "[1] got\ttrue\ttrue") {
			t.Errorf("N=%s: exit %d\n%s\n%s", n, r.code, r.stdout, r.stderr)
		}
	}
}

// A fence, a barrier and a pairwise barrier order a put before a third
// rank's later read across nodes: rank 0 puts 1 MiB into rank 2's window
// (over the network), then releases rank 3 (a signal after a fence, a
// barrier, a barrier_peer with rank 3), and rank 3 reads rank 2's window
// through shared memory. The network orders a rank's operations to one
// peer only, so each of them flushes where a network peer is reached.
func TestOrderingAcrossNodesForAThirdRank(t *testing.T) {
	needUCX(t)
	script := writeScript(t, `
local me, N, mode = lc.rank, 1048576, arg[1]
local w = lc.window{ bytes = N, barriers = 2, signals = 2 }
local src, dst = lc.buffer(N), lc.buffer(N)
src:fill("const", 7)
assert(lc.rank ~= 3 or (w:transport(2) == "shm" and w:transport(0) == "net"), "layout")
local p = lc.plan(function()
  if mode == "barrier" then
    if me == 0 then w:put(2, 0, src, 0, N) end
    w:barrier(0)
    if me == 3 then w:get(2, 0, dst, 0, N); w:flush() end
  elseif mode == "fence" then
    if me == 0 then w:put(2, 0, src, 0, N); w:fence(); w:signal(3, 0, "add", 1) end
    if me == 3 then w:wait_signal_from(0, 0, ">=", 1); w:get(2, 0, dst, 0, N); w:flush() end
  else
    if me == 0 then w:put(2, 0, src, 0, N); w:barrier_peer(3, 0) end
    if me == 3 then w:barrier_peer(0, 0); w:get(2, 0, dst, 0, N); w:flush() end
  end
  w:barrier(1)
end)
assert(p:verify{}.ok)
for round = 1, 3 do
  if me == 2 then w:buffer():fill("const", 0) end
  lc.barrier()
  p:run{ times = 1 }
  lc.sync()
  if me == 3 then
    for off = 0, N - 4, 4096 do
      assert(dst:get_u32(off) == 0x07070707, ("%s, round %d: stale bytes at %d"):format(mode, round, off))
    end
    dst:fill("const", 0)
  end
end
print("fresh")`)
	for _, mode := range []string{"fence", "peer", "barrier"} {
		r := luacoll(t, nil, "run", "-n", "4", "--nodes", "2", script, mode)
		if r.code != 0 || !strings.Contains(r.stdout, "[3] fresh") {
			t.Errorf("%s: exit %d\n%s\n%s", mode, r.code, r.stdout, r.stderr)
		}
	}
}
