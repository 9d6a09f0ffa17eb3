package luabind

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	lua "github.com/yuin/gopher-lua"
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
		{"twice", "result: rank 1, op 5 (reduce_from at test.lua:12): at the end of call 1, allreduce: rank 2's window bytes [32, 36) hold rank 0's contribution 2 times (by rank 1's reduce_from (op 5, test.lua:12))"},
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

// Each call kind's two plans are recorded at its first call and handed out
// in turn from then on, each kind keeping its own turn when calls of
// other kinds come in between (the staged schedules need the halves to
// alternate per kind); a failed recording leaves nothing behind.
func TestPlanTurns(t *testing.T) {
	var turns planTurns
	recorded := 0
	record := func() ([2]*planRef, error) {
		recorded += 2
		return [2]*planRef{{num: recorded - 1}, {num: recorded}}, nil
	}
	a := planKey{call: ReduceCall{N: 1024, Type: kernels.F32, Op: kernels.Sum}}
	b := planKey{call: ReduceCall{N: 4096, Type: kernels.F32, Op: kernels.Sum}}
	c := planKey{call: ReduceCall{N: 1024, Type: kernels.BF16, Op: kernels.Sum}}
	for i, step := range []struct {
		k    planKey
		want int
	}{{a, 1}, {a, 2}, {b, 3}, {a, 1}, {b, 4}, {b, 3}, {a, 2}, {c, 5}, {a, 1}, {c, 6}} {
		r, err := turns.next(step.k, record)
		if err != nil {
			t.Fatal(err)
		}
		if r.num != step.want {
			t.Fatalf("call %d (n=%d, %s): plan %d, want %d", i+1, step.k.call.N, step.k.call.Type, r.num, step.want)
		}
	}
	if recorded != 6 {
		t.Fatalf("%d plans recorded, want 6", recorded)
	}
	// A failed recording (or verification) of a kind's pair is returned,
	// and the next call of the kind makes both again.
	d := planKey{call: ReduceCall{N: 64, Type: kernels.I32, Op: kernels.Max}}
	boom := errors.New("boom")
	n := 0
	failFirst := func() ([2]*planRef, error) {
		n++
		if n == 1 {
			return [2]*planRef{}, boom
		}
		return [2]*planRef{{num: 103}, {num: 104}}, nil
	}
	if _, err := turns.next(d, failFirst); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the recording's error", err)
	}
	if r, err := turns.next(d, failFirst); err != nil || r.num != 103 {
		t.Fatalf("after the failure: plan %v, %v; want 103", r, err)
	}
	if r, err := turns.next(a, record); err != nil || r.num != 2 {
		t.Fatalf("back to the first kind: plan %v, %v; want 2", r, err)
	}
}

// ReducePick names what an auto schedule runs, by size, and nothing for a
// schedule that picks nothing or a module without pick; a pick that
// returns no name is an error naming the module.
func TestReducePick(t *testing.T) {
	code := `
local lc = require("luacoll")
W = lc.window{ bytes = 65536 }
package.loaded.mine = { auto = function() end, pick = function() return 7 end }
package.loaded.nopick = { auto = function() end }
`
	errs := make([]error, 2)
	res := runLuaThen(t, 2, code, func(r int, s *State) {
		w := s.L.GetGlobal("W").(*lua.LUserData).Value.(*windowRef).w
		call := ReduceCall{Type: kernels.F32, Op: kernels.Sum, Scratch: 32768}
		for _, c := range []struct {
			mod  string
			n    uint64
			want string
		}{{"all_reduce", 1024, "one_shot"}, {"all_reduce", 16384, "two_shot_pull"},
			{"reduce_scatter", 1024, "push"}, {"reduce_scatter", 8192, "direct"}} {
			pick := s.ReducePick(c.mod, "auto")
			if pick == nil {
				errs[r] = fmt.Errorf("%s: no pick", c.mod)
				return
			}
			call.N = c.n
			if got, err := pick(w, call); err != nil || got != c.want {
				errs[r] = fmt.Errorf("%s.pick(n=%d) = %q, %v; want %q", c.mod, c.n, got, err, c.want)
				return
			}
		}
		for _, mf := range [][2]string{{"all_reduce", "ring"}, {"nopick", "auto"}} {
			if s.ReducePick(mf[0], mf[1]) != nil {
				errs[r] = fmt.Errorf("%s.%s: a pick", mf[0], mf[1])
				return
			}
		}
		pick := s.ReducePick("mine", "auto")
		if _, err := pick(w, call); err == nil || !strings.Contains(err.Error(), "mine.pick: returned a number") {
			errs[r] = fmt.Errorf("a pick of 7: %v", err)
		}
	})
	for r := range res {
		if res[r].err != nil {
			t.Fatalf("rank %d: %v", r, res[r].err)
		}
		if errs[r] != nil {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
}
