package luabind

import (
	"strings"
	"testing"
	"time"
)

// TestRefusedCollectivesCount: a collective refused on one rank (a bad
// argument, a freed object, the wrong receiver) still takes part in the
// exchange, so every rank's call fails naming the refusal and the next
// collective pairs with the next one everywhere: lc.allgather returns
// every rank's own value in place.
func TestRefusedCollectivesCount(t *testing.T) {
	cases := []struct {
		name     string
		setup    string // both ranks
		bad, ok  string // rank 0, rank 1
		wantMine string // in rank 0's error
	}{
		{"allgather", "", "lc.allgather(print)", `lc.allgather("r1-first")`, "bad argument #1 'v'"},
		{"barrier", "", "lc.barrier(1)", "lc.barrier()", "lc.barrier: takes no arguments"},
		{"window", "", "lc.window{bytes = -1}", "lc.window{bytes = 64}", "bad argument 'bytes'"},
		{"window_unknown_option", "", "lc.window{bytes = 64, sigals = 2}", "lc.window{bytes = 64}", "bad argument 'sigals'"},
		{"free_freed", "local w = lc.window{bytes = 64}; local w2 = lc.window{bytes = 64}; w:free()",
			"w:free()", "w2:free()", "freed"},
		{"free_with_a_dot", "local w = lc.window{bytes = 64}", "w.free()", "w:free()", "use w:free (with a colon)"},
		{"allgather_persistent", "local w = lc.window{bytes = 64}", "lc.allgather_persistent{window = w, graf = true}",
			"lc.allgather_persistent{window = w}", "bad argument 'graf'"},
		{"destroy_twice", "local w = lc.window{bytes = 64}; local ag = lc.allgather_persistent{window = w}; ag:destroy()",
			"ag:destroy()", "lc.barrier()", "destroyed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code := `local lc = require("luacoll")
` + tc.setup + `
local ok, err
if lc.rank == 0 then ok, err = pcall(function() return ` + tc.bad + ` end)
else ok, err = pcall(function() return ` + tc.ok + ` end) end
print("first", ok, err)
local all = lc.allgather("r" .. lc.rank .. "-second")
print("second", table.concat(all, " | "))
`
			res := runLuaWith(t, 2, code, "refused.lua", 5*time.Second)
			mustAllOK(t, res)
			for r, x := range res {
				if !strings.Contains(x.out, "second\tr0-second | r1-second") {
					t.Errorf("rank %d: the next collective paired wrongly:\n%s", r, x.out)
				}
				if strings.Contains(x.out, "first\ttrue") {
					t.Errorf("rank %d: the refused call succeeded:\n%s", r, x.out)
				}
			}
			if !strings.Contains(res[0].out, tc.wantMine) {
				t.Errorf("rank 0's error lacks %q:\n%s", tc.wantMine, res[0].out)
			}
			if !strings.Contains(res[1].out, "rank 0 refused it") || !strings.Contains(res[1].out, tc.wantMine) {
				t.Errorf("rank 1's error does not name rank 0's refusal:\n%s", res[1].out)
			}
		})
	}
}

// TestRefusedExecCounts: an ag:exec refused on rank 0 fails rank 1's wait
// for it at once (not at the window timeout) naming rank 0, and the next
// exec gathers the right data on both.
func TestRefusedExecCounts(t *testing.T) {
	code := `local lc = require("luacoll")
local n = 256
local w = lc.window{ bytes = n * lc.size, timeout_ms = 20000 }
local ag = lc.allgather_persistent{ window = w }
local src = lc.buffer(n)
src:fill("iota", lc.rank * 1000)
local t0 = lc.now()
local ok, err = pcall(function()
  if lc.rank == 0 then ag:exec(src, 0, n * 4) else ag:exec(src, 0, n) end
  w:sync()
end)
print("first", ok, err, lc.now() - t0 < 10)
src:fill("iota", lc.rank * 1000 + 7)
ag:exec(src, 0, n)
w:sync()
for r = 0, lc.size - 1 do
  local ref = lc.buffer(n); ref:fill("iota", r * 1000 + 7)
  assert(w:buffer():equal(ref, r * n, 0, n), "chunk " .. r)
end
ag:destroy()
print("second ok")
`
	res := runLuaWith(t, 2, code, "exec.lua", 20*time.Second)
	mustAllOK(t, res)
	for r, x := range res {
		if !strings.Contains(x.out, "second ok") || !strings.Contains(x.out, "first\tfalse") || !strings.Contains(x.out, "\ttrue\n") {
			t.Errorf("rank %d:\n%s", r, x.out)
		}
	}
	if !strings.Contains(res[0].out, "bad argument 'n'") {
		t.Errorf("rank 0:\n%s", res[0].out)
	}
	if !strings.Contains(res[1].out, "rank 0 refused it") {
		t.Errorf("rank 1 does not name rank 0:\n%s", res[1].out)
	}
}
