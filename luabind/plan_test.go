package luabind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

// runLuaThen is runLuaWith that calls after(rank, state) once the chunk
// has run on that rank, before the rank closes.
func runLuaThen(t *testing.T, n int, code string, after func(r int, s *State)) []rankResult {
	t.Helper()
	g := inproc.NewGroup(n)
	job := fmt.Sprintf("pt%d", time.Now().UnixNano())
	res := make([]rankResult, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			env := engine.RankEnv{Rank: i, Size: n, LocalRank: i, LocalSize: n, JobID: job, Prefixed: true}
			comm, err := engine.OpenWith(ctx, env, engine.Options{Timeout: 5 * time.Second}, g.Member(i), transport.NewAbort(), nil)
			if err != nil {
				res[i].err = err
				return
			}
			var out bytes.Buffer
			s := New(comm, &out)
			s.Ctx = ctx
			err = s.Run([]byte(code), "test.lua", nil)
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
	return res
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

// runLuaArgs runs code with ... = args on n ranks.
func runLuaArgs(t *testing.T, n int, code string, args ...string) []rankResult {
	t.Helper()
	var b strings.Builder
	b.WriteString("local __a = {")
	for _, a := range args {
		fmt.Fprintf(&b, "%q,", a)
	}
	b.WriteString("}\nlocal function __main(...)\n")
	b.WriteString(code)
	b.WriteString("\nend\n__main(__a[1], tonumber(__a[2]) or __a[2], __a[3])\n")
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
