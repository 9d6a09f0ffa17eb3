package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/window"
)

// Schedule loads function fn of module mod (required as a script would:
// a file next to the script or an embedded scripts/lib module) and returns
// a Go function that calls it as fn(w, src, 0, n), or fn(w, src, 0, n,
// {staging = staging}) when staging is not 0, so that benchmarks run a
// schedule written in Lua against the same window as the built-in one. The
// function reports how many all-gathers a call made (1).
func (s *State) Schedule(mod, fn string) (func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error), error) {
	L := s.L
	f, err := s.scheduleFunc(mod, fn)
	if err != nil {
		return nil, err
	}
	// Schedules keep per-window state keyed by the window's Lua value, so
	// each Go object maps to one userdata for as long as the state lives.
	wuds := map[*window.Window]*lua.LUserData{}
	buds := map[*window.Buffer]*lua.LUserData{}
	return func(w *window.Window, src *window.Buffer, n, staging uint64) (int, error) {
		s.cur = L
		wud := wuds[w]
		if wud == nil {
			wud = L.NewUserData()
			wud.Value = &windowRef{w: w}
			L.SetMetatable(wud, L.GetTypeMetatable(receivers["w"].typ))
			wuds[w] = wud
		}
		bud := buds[src]
		if bud == nil {
			bud = L.NewUserData()
			bud.Value = &bufferRef{b: src}
			L.SetMetatable(bud, L.GetTypeMetatable(receivers["b"].typ))
			buds[src] = bud
		}
		args := []lua.LValue{wud, bud, lua.LNumber(0), lua.LNumber(n)}
		if staging != 0 {
			args = append(args, stagingOpts(L, staging))
		}
		err := L.CallByParam(lua.P{Fn: f, NRet: 0, Protect: true}, args...)
		if err != nil {
			return 0, fmt.Errorf("%s.%s: %s", mod, fn, strings.TrimSpace(scriptError(err).Error()))
		}
		return 1, nil
	}, nil
}

// stagingOpts is the options table {staging = off} of a staged call.
func stagingOpts(L *lua.LState, off uint64) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("staging", lua.LNumber(off))
	return t
}

// scheduleFunc requires mod and returns its function fn.
func (s *State) scheduleFunc(mod, fn string) (*lua.LFunction, error) {
	L := s.L
	if err := L.CallByParam(lua.P{Fn: L.GetGlobal("require"), NRet: 1, Protect: true}, lua.LString(mod)); err != nil {
		return nil, fmt.Errorf("require %q: %w", mod, scriptError(err))
	}
	m := L.Get(-1)
	L.Pop(1)
	f, ok := L.GetField(m, fn).(*lua.LFunction)
	if !ok {
		return nil, fmt.Errorf("module %q has no function %q", mod, fn)
	}
	return f, nil
}
