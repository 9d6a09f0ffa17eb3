package luabind

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// libVerifyCode records every schedule of scripts/lib (all-gather ring,
// direct and hier, with and without staging and in place, hier on two
// nodes staged too; the pairwise
// all-to-all; the dissemination barrier) as a plan and verifies it over
// three replays: none may raise a false alarm.
const libVerifyCode = `
local lc = require("luacoll")
local ag = require("allgather")
local a2a = require("alltoall")
local bar = require("barrier")
local size, me = lc.size, lc.rank
local n = 24
local function ok(name, p, t)
  t.replays = 3
  local rep = p:verify(t)
  assert(rep.ok, ("%s at %d ranks: %s"):format(name, size, rep.summary))
  p:free()
end
local w = lc.window{ bytes = 3 * n * size, signals = 4 }
local src = lc.buffer(n * size)
for _, algo in ipairs{ "ring", "direct", "hier" } do
  ok(algo, lc.plan(ag[algo], w, src, 0, n), { collective = "allgather", n = n, src = src })
  ok(algo .. " in place", lc.plan(ag[algo], w, w, me * n, n), { collective = "allgather", n = n })
end
if size % 2 == 0 then
  ok("hier on 2 nodes", lc.plan(ag.hier, w, src, 0, n, { nodes = 2, pieces = 3 }), { collective = "allgather", n = n, src = src })
end
local opts = { staging = n * size, signal = 1 }
for _, algo in ipairs{ "ring", "direct", "hier" } do
  local f = ag[algo]
  ok(algo .. " staged", lc.plan(function(...) f(...); f(...) end, w, src, 0, n, opts), { collective = "allgather", n = n, src = src })
  ok(algo .. " staged in place", lc.plan(function(...) f(...); f(...) end, w, w, me * n, n, opts), { collective = "allgather", n = n })
end
if size % 2 == 0 then
  local o2 = { staging = n * size, signal = 1, nodes = 2, pieces = 3 }
  ok("hier on 2 nodes staged", lc.plan(function(...) ag.hier(...); ag.hier(...) end, w, src, 0, n, o2), { collective = "allgather", n = n, src = src })
end
ok("alltoall", lc.plan(a2a.pairwise, w, src, 0, n, { signal = 2 }), { collective = "alltoall", n = n, src = src })
ok("alltoall unnamed source", lc.plan(a2a.pairwise, w, src, 0, n, { signal = 2 }), { collective = "alltoall", n = n })
ok("barrier", lc.plan(bar.dissemination, w, 3), {})
w:free()
print("ok")
`

// TestVerifyLibrarySchedules: no false alarm on the shipped schedules at
// 2 to 64 ranks.
func TestVerifyLibrarySchedules(t *testing.T) {
	sizes := []int{2, 3, 4, 5, 8, 64}
	if testing.Short() || raceOn {
		sizes = sizes[:5] // 64 ranks take a minute under the race detector
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			res := runLuaWith(t, n, libVerifyCode, "lib.lua", 20*time.Second)
			mustAllOK(t, res)
			for r, x := range res {
				if !strings.Contains(x.out, "ok") {
					t.Fatalf("rank %d: %q", r, x.out)
				}
			}
		})
	}
}
