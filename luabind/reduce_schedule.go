package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

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
