package luabind

import (
	"fmt"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/transport"
)

// planSchedCode makes the window W and two planted schedules: an
// all-reduce that reduces one peer's input in twice, and one_shot_pull as
// it was before its closing self-put was flushed.
const planSchedCode = `
local lc = require("luacoll")
local rs = require("reduce_scatter")
W = lc.window{ bytes = 65536 }
package.loaded.planted = {
  twice = function(w, n, opts) -- two_shot_pull, rank 1 pulling rank 0's part twice
    local o = rs.options(opts, n / lc.size, n)
    local me, size, len = lc.rank, lc.size, n / lc.size
    local at = o.input + me * len
    rs.meet(w, o.ready)
    for i = 1, size - 1 do w:reduce_from((me + i) % size, at, w, at, len, o.type, o.op) end
    if me == 1 then w:reduce_from(0, at, w, at, 4, o.type, o.op) end -- PLANT twice
    rs.meet(w, o.done)
    for i = 1, size - 1 do w:put_signal((me + i) % size, at, w, at, len, o.sig, 1, "add") end
    local data = rs.rows(w, o.sig)
    for i = 1, size - 1 do
      local p = (me - i) % size
      data[p] = data[p] + 1
      w:wait_signal_from(p, o.sig, ">=", data[p])
    end
    w:flush()
  end,
  unflushed = function(w, n, opts)
    local o = rs.options(opts, n, n)
    rs.meet(w, o.ready)
    w:get(0, o.input, w, o.scratch, n)
    w:flush()
    for p = 1, lc.size - 1 do w:reduce_from(p, o.input, w, o.scratch, n, o.type, o.op) end
    rs.meet(w, o.done)
    w:put(lc.rank, o.input, w, o.scratch, n) -- PLANT unflushed
  end,
}
`

// runPlanSchedule runs mod.fn through ReduceSchedulePlan on 3 ranks, four
// calls of n bytes, and returns each rank's error.
func runPlanSchedule(t *testing.T, coll, mod, fn string, n uint64) []error {
	t.Helper()
	errs := make([]error, 3)
	res := runLuaThen(t, 3, planSchedCode, func(r int, s *State) {
		w := s.L.GetGlobal("W").(*lua.LUserData).Value.(*windowRef).w
		sched, err := s.ReduceSchedulePlan(mod, fn)
		if err != nil {
			errs[r] = err
			return
		}
		f32, _ := transport.ParseDType("f32")
		sum, _ := transport.ParseRedOp("sum")
		for i := 0; i < 4 && err == nil; i++ {
			err = sched(w, ReduceCall{N: n, Type: f32, Op: sum, Scratch: 3 * 3 * n, Coll: coll})
		}
		if err == nil {
			err = w.Sync(s.Ctx)
		}
		errs[r] = err
	})
	mustAllOK(t, res)
	return errs
}

// TestReduceSchedulePlanVerifies: the benchmark's --plan path verifies a
// size's two plans as one list of both calls, replayed, with the
// collective's result proved at the end of every call. The shipped
// schedules (the staged ones included) pass with no problem let through;
// a double-counted contribution and one_shot_pull's old unflushed
// self-put are refused on every rank before anything runs, naming the
// line.
func TestReduceSchedulePlanVerifies(t *testing.T) {
	for _, tc := range []struct{ coll, mod, fn string }{
		{"reduce_scatter", "reduce_scatter", "ring"}, {"reduce_scatter", "reduce_scatter", "direct"},
		{"reduce_scatter", "reduce_scatter", "push"}, {"allreduce", "all_reduce", "ring"},
		{"allreduce", "all_reduce", "one_shot"}, {"allreduce", "all_reduce", "two_shot"},
		{"allreduce", "all_reduce", "one_shot_pull"}, {"allreduce", "all_reduce", "two_shot_pull"},
	} {
		t.Run(tc.fn+"/"+tc.coll, func(t *testing.T) {
			for r, err := range runPlanSchedule(t, tc.coll, tc.mod, tc.fn, 96) {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
	for _, tc := range []struct{ fn, want string }{
		// Seen first at the end of the first call, by the per-call check.
		{"twice", "result: rank 2, op 9 (wait_signal_from at test.lua:19): at the end of call 1, allreduce: rank 2's window bytes [32, 36) hold rank 0's contribution 2 times"},
		{"unflushed", "race"},
	} {
		t.Run("planted-"+tc.fn, func(t *testing.T) {
			line := lineOf(t, planSchedCode, "-- PLANT "+tc.fn)
			for r, err := range runPlanSchedule(t, "allreduce", "planted", tc.fn, 96) {
				if err == nil || !strings.Contains(err.Error(), "fail verification") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("rank %d: want %q refusing the plans, got %v", r, tc.want, err)
					continue
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("test.lua:%d", line)) {
					t.Errorf("rank %d: the refusal does not name line %d: %v", r, line, err)
				}
			}
		})
	}
}
