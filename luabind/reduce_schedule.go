package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// ReduceCall is one call of a reduction schedule: n bytes (the
// schedule's own n: the chunk of reduce_scatter, the whole input of
// all_reduce) of element type Type, reduced with Op, the scratch the
// schedule may use at offset Scratch of the window.
type ReduceCall struct {
	N       uint64
	Type    transport.DType
	Op      transport.RedOp
	Scratch uint64
}

// ReduceSchedule loads function fn of module mod (reduce_scatter.ring,
// all_reduce.two_shot, or a module next to the script) and returns a Go
// function that calls it as fn(w, n, {type = ..., op = ..., scratch =
// ...}), so that benchmarks run a reduction written in Lua.
func (s *State) ReduceSchedule(mod, fn string) (func(w *window.Window, call ReduceCall) error, error) {
	L := s.L
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	// Schedules keep per-window tallies keyed by the window's Lua value:
	// one userdata per window for as long as the state lives.
	wuds := map[*window.Window]*lua.LUserData{}
	return func(w *window.Window, call ReduceCall) error {
		s.cur = L
		wud := wuds[w]
		if wud == nil {
			wud = s.userdata(&windowRef{w: w}, "w")
			wuds[w] = wud
		}
		opts := L.NewTable()
		opts.RawSetString("type", lua.LString(call.Type.String()))
		opts.RawSetString("op", lua.LString(call.Op.String()))
		opts.RawSetString("scratch", lua.LNumber(call.Scratch))
		if err := L.CallByParam(lua.P{Fn: f, NRet: 0, Protect: true}, wud, lua.LNumber(call.N), opts); err != nil {
			return fmt.Errorf("%s.%s: %s", mod, fn, strings.TrimSpace(scriptError(err).Error()))
		}
		return nil
	}, nil
}

// ReduceSchedulePlan is ReduceSchedule with each call size recorded once
// into a plan (lc.plan, in s.PlanMode) and replayed after; the plan is
// verified for deadlocks and races (the verifier does not yet check what
// a reduction computes: the benchmark's host reference does).
func (s *State) ReduceSchedulePlan(mod, fn string) (func(w *window.Window, call ReduceCall) error, error) {
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	type key struct {
		w    *window.Window
		call ReduceCall
	}
	plans := map[key]*planRef{}
	wuds := map[*window.Window]*lua.LUserData{}
	return func(w *window.Window, call ReduceCall) error {
		k := key{w, call}
		r := plans[k]
		if r == nil {
			s.cur = s.L
			wud := wuds[w]
			if wud == nil {
				wud = s.userdata(&windowRef{w: w}, "w")
				wuds[w] = wud
			}
			opts := s.L.NewTable()
			opts.RawSetString("type", lua.LString(call.Type.String()))
			opts.RawSetString("op", lua.LString(call.Op.String()))
			opts.RawSetString("scratch", lua.LNumber(call.Scratch))
			args := []lua.LValue{wud, lua.LNumber(call.N), opts}
			var err error
			r, err = s.makePlan(s.Ctx, s.L, f, args, s.PlanMode, fmt.Sprintf("%s.%s(n=%d)", mod, fn, call.N))
			if err != nil {
				return fmt.Errorf("%s.%s: recording a plan: %w", mod, fn, err)
			}
			rep, err := s.verifyLists(s.Ctx, fmt.Sprintf("plan %d", r.num), r.p.Lists(), plan.Options{})
			if err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("%s.%s: the plan of n=%d fails verification: %s", mod, fn, call.N, rep.Summary())
			}
			plans[k] = r
			if s.PlanModes == nil {
				s.PlanModes = map[uint64]string{}
			}
			s.PlanModes[call.N] = r.mode
		}
		return r.p.Run(1)
	}, nil
}
