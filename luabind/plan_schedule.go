package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan/verify"
	"github.com/luacoll/luacoll/window"
)

// SchedulePlan is Schedule with the schedule recorded into a plan: the
// first call for a window, source and size records fn(w, src, 0, n) with
// lc.plan (collective), verifies it as an all-gather of src (its problems,
// if any, are the error), and replays it; later calls replay it, with no
// Lua on the way. With staging, the plan records two calls (one per
// staging half, which a staged schedule alternates), so that replays
// alternate too; a call then makes two all-gathers and says so.
func (s *State) SchedulePlan(mod, fn string) (func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error), error) {
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	type key struct {
		w          *window.Window
		src        *window.Buffer
		n, staging uint64
	}
	plans := map[key]*planRef{}
	// One userdata per object, as Schedule keeps: schedules count their
	// signals per window value, and the plans' ledger relies on that count.
	uds := map[any]*lua.LUserData{}
	ud := func(obj any, v any, recv string) *lua.LUserData {
		if uds[obj] == nil {
			uds[obj] = s.userdata(v, recv)
		}
		return uds[obj]
	}
	return func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error) {
		k := key{w, src, n, staging}
		execs := 1
		if staging != 0 {
			execs = 2
		}
		r := plans[k]
		if r == nil {
			s.cur = s.L
			args := []lua.LValue{ud(w, &windowRef{w: w}, "w"), ud(src, &bufferRef{b: src}, "b"), lua.LNumber(0), lua.LNumber(n)}
			body := f
			if staging != 0 {
				args = append(args, stagingOpts(s.L, staging))
				// Both staging halves, in one plan.
				body = s.L.NewFunction(func(L *lua.LState) int {
					nargs := L.GetTop()
					for range 2 {
						L.Push(f)
						for i := 1; i <= nargs; i++ {
							L.Push(L.Get(i))
						}
						L.Call(nargs, 0)
					}
					return 0
				})
			}
			var err error
			r, err = s.makePlan(s.Ctx, s.L, body, args, s.PlanMode, fmt.Sprintf("%s.%s(n=%d)", mod, fn, n))
			if err != nil {
				return 0, fmt.Errorf("%s.%s: recording a plan: %w", mod, fn, err)
			}
			c := verify.Collective{Kind: "allgather", N: n}
			for i, b := range r.p.Buffers() {
				if b == src {
					for range r.p.Lists() {
						c.Src = append(c.Src, verify.Source{Buf: i})
					}
				}
			}
			rep, err := s.verifyLists(s.Ctx, fmt.Sprintf("plan %d", r.num), r.p.Lists(), verify.Options{Collective: c})
			if err != nil {
				return 0, err
			}
			if !rep.OK {
				return 0, fmt.Errorf("%s.%s: the plan of n=%d fails verification: %s", mod, fn, n, rep.Summary())
			}
			plans[k] = r
			if s.PlanModes == nil {
				s.PlanModes = map[uint64]string{}
			}
			s.PlanModes[n] = r.mode
			s.predict(r, n, execs)
		}
		return execs, r.p.Run(1)
	}, nil
}

// Mode says how plans replay on this rank: "host", or on CUDA "auto"
// ("device" where a plan's ops suit the interpreter, else "stream") or the
// PlanMode asked for.
func (s *State) Mode() string {
	m, _ := s.pickMode(s.PlanMode)
	if m == modeStream && (s.PlanMode == "" || s.PlanMode == "auto") {
		return "auto"
	}
	return m
}

// userdata wraps v as a Lua value of receiver recv's type.
func (s *State) userdata(v any, recv string) *lua.LUserData {
	ud := s.L.NewUserData()
	ud.Value = v
	s.L.SetMetatable(ud, s.L.GetTypeMetatable(receivers[recv].typ))
	return ud
}
