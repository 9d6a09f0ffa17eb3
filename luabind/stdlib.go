package luabind

import (
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// MaxStringBytes bounds the string string.rep makes: a larger one would
// end the rank in the Go runtime's out-of-memory abort, which no error
// handler can catch, instead of a Lua error naming the line.
const MaxStringBytes = 1 << 30

// GuardStdlib makes two functions of Lua's string library behave as in
// Lua 5.1 where gopher-lua's do not: string.format raises an error naming
// an argument that is missing or of the wrong type (gopher-lua prints
// "%!d(MISSING)" or 0), and string.rep refuses a result over
// MaxStringBytes.
func GuardStdlib(L *lua.LState) {
	str, ok := L.GetGlobal("string").(*lua.LTable)
	if !ok {
		return
	}
	if orig, ok := L.GetField(str, "format").(*lua.LFunction); ok {
		L.SetField(str, "format", L.NewFunction(func(L *lua.LState) int {
			checkFormat(L)
			top := L.GetTop()
			L.Push(orig)
			for i := 1; i <= top; i++ {
				L.Push(L.Get(i))
			}
			L.Call(top, 1)
			return 1
		}))
	}
	if orig, ok := L.GetField(str, "rep").(*lua.LFunction); ok {
		L.SetField(str, "rep", L.NewFunction(func(L *lua.LState) int {
			s, n := L.CheckString(1), L.CheckInt(2)
			if n > 0 && len(s) > 0 && uint64(n) > MaxStringBytes/uint64(len(s)) { // len*n past the bound, without overflow
				L.RaiseError("string.rep: %d copies of %d bytes make %.0f bytes, over the %d a string may hold", n, len(s), float64(len(s))*float64(n), MaxStringBytes)
			}
			L.Push(orig)
			L.Push(L.Get(1))
			L.Push(L.Get(2))
			L.Call(2, 1)
			return 1
		}))
	}
}

// checkFormat checks string.format's arguments against the directives of
// its format (argument 1), raising Lua 5.1's errors.
func checkFormat(L *lua.LState) {
	f := L.CheckString(1)
	arg := 1
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		for i < len(f) && strings.IndexByte("-+ #0123456789.", f[i]) >= 0 {
			i++
		}
		if i >= len(f) {
			L.RaiseError("%s", "bad argument #1 to 'format' (invalid format: it ends inside a % directive)")
		}
		arg++
		switch c := f[i]; c {
		case 'd', 'i', 'c', 'x', 'X', 'o', 'u', 'e', 'E', 'f', 'g', 'G':
			if arg > L.GetTop() {
				L.RaiseError("bad argument #%d to 'format' (number expected, got no value)", arg)
			}
			v := L.Get(arg)
			if _, isNum := v.(lua.LNumber); !isNum && !isNumeric(v) {
				L.RaiseError("bad argument #%d to 'format' (number expected, got %s)", arg, v.Type())
			}
		case 's', 'q':
			if arg > L.GetTop() {
				L.RaiseError("bad argument #%d to 'format' (string expected, got no value)", arg)
			}
		default:
			L.RaiseError("bad argument #1 to 'format' (invalid option '%%%c')", c)
		}
	}
}

// isNumeric reports whether v is a string Lua converts to a number.
func isNumeric(v lua.LValue) bool {
	s, ok := v.(lua.LString)
	if !ok {
		return false
	}
	t := strings.TrimSpace(string(s))
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return true
	}
	_, err := strconv.ParseInt(t, 0, 64)
	return err == nil
}
