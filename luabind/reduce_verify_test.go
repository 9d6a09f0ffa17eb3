package luabind

import (
	"fmt"
	"strings"
	"testing"
)

// TestVerifyReduceSchedules records the ring reduce-scatter and the ring
// all-reduce of scripts/lib as plans and proves their results with
// p:verify (one replay, and three with no problem but the ring's known
// stand-in); a schedule that reduces a neighbour's partial twice is
// reported naming the rank, op and line.
func TestVerifyReduceSchedules(t *testing.T) {
	code := `
local lc = require("luacoll")
local rs = require("reduce_scatter")
local ar = require("all_reduce")
local coll, plant, n = ...
n = tonumber(n)
local w = lc.window{ bytes = n * lc.size + 2 * n * lc.size + 64 }
local p = lc.plan(function(w)
  if coll == "reduce_scatter" then rs.ring(w, n) else ar.ring(w, n) end
  if plant == "twice" and lc.rank == 1 then
    -- The scratch slot of the ring's last step holds the left
    -- neighbour's partial of this rank's chunk: reduce it in again.
    local chunk, scratch = n, lc.size * n
    if coll == "allreduce" then chunk, scratch = math.floor(n / lc.size), n end
    w:reduce(w, lc.rank * chunk, w, scratch + ((lc.size - 2) % 2) * chunk, 4, "f32", "sum") -- PLANT
  end
end, w)
local rep = p:verify{ collective = coll, window = w, n = n, replays = 1 }
if plant == "none" then
  assert(rep.ok, rep.summary)
  -- Replays back to back: the ring's opening wait for the previous
  -- call's acknowledgements is reported as a stand-in (it is met by the
  -- last replay's signal by design); nothing else may be.
  rep = p:verify{ collective = coll, window = w, n = n, replays = 3 }
  for _, pr in ipairs(rep.problems) do
    assert(pr.kind == "stand-in", ("%s at line %d: %s"):format(pr.kind, pr.line, pr.message))
  end
else
  assert(not rep.ok, "the planted bug is not reported")
  local hit = false
  for _, pr in ipairs(rep.problems) do
    if pr.kind == "postcondition" and pr.rank == 1 and pr.op_name == "reduce" and pr.message:find("contribution") then
      hit = true
      print(("found %s line %d: %s"):format(pr.kind, pr.line, pr.message))
    end
  end
  assert(hit, rep.summary)
end
p:free()
print("verify ok")
`
	for _, coll := range []string{"reduce_scatter", "allreduce"} {
		for ranks := 2; ranks <= 8; ranks++ {
			if testing.Short() && ranks > 4 {
				continue
			}
			n := 64 * ranks
			t.Run(fmt.Sprintf("%s/%d", coll, ranks), func(t *testing.T) {
				mustAllOK(t, runLuaArgs(t, ranks, code, coll, "none", fmt.Sprint(n)))
			})
		}
		t.Run(coll+"/planted-twice", func(t *testing.T) {
			res := runLuaArgs(t, 3, code, coll, "twice", "192")
			mustAllOK(t, res)
			line := lineOf(t, code, "-- PLANT")
			if !strings.Contains(res[1].out, fmt.Sprintf("line %d:", line)) {
				t.Errorf("rank 1's report does not name line %d: %s", line, res[1].out)
			}
		})
	}
}
