package luabind

import (
	lua "github.com/yuin/gopher-lua"
)

// installPcall replaces pcall with one that runs the protected function on
// a fresh Lua thread (a coroutine state sharing the globals). gopher-lua closes every open upvalue of a state when
// an error is raised outside a handler, which would detach a script's
// locals from the closures that share them (after `local n = 0; local
// function inc() n = n + 1 end`, an error caught by pcall would leave n and
// inc's n apart). On its own thread the error closes only that thread's
// upvalues, and the script's locals stay shared.
func installPcall(L *lua.LState) {
	L.SetGlobal("pcall", L.NewFunction(func(L *lua.LState) int {
		fn := L.CheckAny(1)
		args := make([]lua.LValue, 0, L.GetTop()-1)
		for i := 2; i <= L.GetTop(); i++ {
			args = append(args, L.Get(i))
		}
		f, ok := fn.(*lua.LFunction)
		if !ok {
			// Calling a non-function fails like Lua's pcall does.
			mt := L.GetMetaField(fn, "__call")
			cf, isFn := mt.(*lua.LFunction)
			if !isFn {
				L.Push(lua.LFalse)
				L.Push(lua.LString("attempt to call a " + fn.Type().String() + " value"))
				return 2
			}
			f, args = cf, append([]lua.LValue{fn}, args...)
		}
		th, cancel := L.NewThread()
		if cancel != nil {
			defer cancel()
		}
		defer th.Close()
		th.Push(f)
		for _, a := range args {
			th.Push(a)
		}
		if err := th.PCall(len(args), lua.MultRet, nil); err != nil {
			L.Push(lua.LFalse)
			if ae, ok := err.(*lua.ApiError); ok {
				L.Push(ae.Object)
			} else {
				L.Push(lua.LString(err.Error()))
			}
			return 2
		}
		values := make([]lua.LValue, th.GetTop())
		for i := range values {
			values[i] = th.Get(i + 1)
		}
		L.Push(lua.LTrue)
		for _, v := range values {
			L.Push(v)
		}
		return 1 + len(values)
	}))
}
