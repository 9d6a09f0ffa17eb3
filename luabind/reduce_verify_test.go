package luabind

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// verifyReduceCode records a reduce-scatter or all-reduce schedule of
// scripts/lib (args: "coll.algo", the plant, n, the op) and verifies it.
const verifyReduceCode = `
local lc = require("luacoll")
local rs = require("reduce_scatter")
local ar = require("all_reduce")
local which, plant, n, op = ...
n, op = tonumber(n), op or "sum"
local coll, algo = which:match("^(.-)%.(.*)$")
local calls = (algo == "push" or algo == "one_shot" or algo == "two_shot" or algo == "auto") and 2 or 1
local w = lc.window{ bytes = 4 * lc.size * lc.size * n + 64 }
local p = lc.plan(function(w)
  for _ = 1, plant == "none" and calls or 1 do
    if coll == "reduce_scatter" then rs[algo](w, n, { op = op }) else ar[algo](w, n, { op = op }) end
  end
  if plant == "twice" and lc.rank == 1 and algo == "direct" then
    w:reduce_from(0, lc.rank * n, w, lc.rank * n, 4, "f32", op) -- PLANT direct
  elseif plant == "twice" and lc.rank == 1 then
    -- The scratch slot of the ring's last step holds the left
    -- neighbour's partial of this rank's chunk: reduce it in again.
    local chunk, scratch = n, lc.size * n
    if coll == "allreduce" then chunk, scratch = math.floor(n / lc.size), n end
    w:reduce(w, lc.rank * chunk, w, scratch + ((lc.size - 2) % 2) * chunk, 4, "f32", op) -- PLANT ring
  end
end, w)
if plant == "none" or op == "max" or op == "min" then
  local rep = p:verify{ collective = coll, window = w, n = n, replays = plant == "none" and 3 or 1, calls = plant == "none" and calls or 1 }
  assert(rep.ok, rep.summary)
  print("verify: " .. rep.summary)
else
  local rep = p:verify{ collective = coll, window = w, n = n, replays = 1 }
  assert(not rep.ok, "the planted bug is not reported")
  local hit = false
  for _, pr in ipairs(rep.problems) do
    if pr.kind == "postcondition" and pr.rank == 1 and pr.op_name == (algo == "direct" and "reduce_from" or "reduce") and pr.message:find("contribution") then
      hit = true
      print(("found %s line %d: %s"):format(pr.kind, pr.line, pr.message))
    end
  end
  assert(hit, rep.summary)
end
p:free()
print("verify ok")
`

// TestVerifyReduceSchedules records the reduce-scatter and all-reduce
// schedules of scripts/lib as plans and proves them with p:verify over
// three replays back to back, every call's result included: ok, with no
// problem of any kind. The staged schedules (push, one_shot, two_shot)
// alternate between two staging halves, so their plan records two calls
// (calls = 2), as does auto (which picks them at these sizes); the
// others one. A schedule that reduces a neighbour's
// partial twice is reported naming the rank, op and line.
func TestVerifyReduceSchedules(t *testing.T) {
	code := verifyReduceCode
	for _, which := range []string{"reduce_scatter.ring", "reduce_scatter.direct", "reduce_scatter.push", "reduce_scatter.auto",
		"allreduce.ring", "allreduce.one_shot", "allreduce.two_shot", "allreduce.one_shot_pull", "allreduce.two_shot_pull", "allreduce.auto"} {
		for _, ranks := range []int{2, 3, 4, 8} {
			if testing.Short() && ranks > 4 {
				continue
			}
			n := 64 * ranks
			t.Run(fmt.Sprintf("%s/%d", which, ranks), func(t *testing.T) {
				res := runLuaArgs(t, ranks, code, which, "none", fmt.Sprint(n))
				mustAllOK(t, res)
				if !strings.Contains(res[0].out, "verify: ok") {
					t.Errorf("rank 0 printed no verdict: %q", res[0].out)
				}
			})
		}
	}
	for _, which := range []string{"reduce_scatter.ring", "allreduce.ring", "reduce_scatter.direct"} {
		t.Run(which+"/planted-twice", func(t *testing.T) {
			res := runLuaArgs(t, 3, code, which, "twice", "192")
			mustAllOK(t, res)
			marker := "-- PLANT ring"
			if strings.HasSuffix(which, ".direct") {
				marker = "-- PLANT direct"
			}
			line := lineOf(t, code, marker)
			if !strings.Contains(res[1].out, fmt.Sprintf("line %d:", line)) {
				t.Errorf("rank 1's report does not name line %d: %s", line, res[1].out)
			}
		})
	}
}

// TestVerifyIdempotentTwice: max and min take a contribution twice and
// give the same result, so the planted second reduction that a sum
// reports is no problem for them: p:verify says ok.
func TestVerifyIdempotentTwice(t *testing.T) {
	for _, which := range []string{"reduce_scatter.ring", "allreduce.ring", "reduce_scatter.direct"} {
		for _, op := range []string{"max", "min"} {
			t.Run(which+"/"+op, func(t *testing.T) {
				res := runLuaArgs(t, 3, verifyReduceCode, which, "twice", "192", op)
				mustAllOK(t, res)
				if !strings.Contains(res[0].out, "verify: ok") {
					t.Errorf("rank 0 printed no verdict: %q", res[0].out)
				}
			})
		}
	}
}

// TestReduceVerifyScript runs tests/reduce_verify.lua (the table of
// docs/results/reductions.md): every shipped schedule verifies ok, and
// rank 0 prints one line per schedule: 10, and the 3 staged ones with
// each fold.
func TestReduceVerifyScript(t *testing.T) {
	src, name, err := LoadScript("tests/reduce_verify.lua")
	if err != nil {
		t.Fatal(err)
	}
	res := runLuaWith(t, 3, string(src), name, 10*time.Second)
	mustAllOK(t, res)
	if got := strings.Count(res[0].out, "  ok: 3 ranks"); got != 16 {
		t.Fatalf("rank 0 printed %d verdicts ok of 16:\n%s", got, res[0].out)
	}
}
