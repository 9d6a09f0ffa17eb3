package simrank

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// args reads a call's arguments, naming them in errors as real ranks do.
type args struct {
	rk    *rank
	L     *lua.LState
	name  string
	base  int // stack index of the first argument
	names []string
}

func (rk *rank) args(L *lua.LState, name string, base int, names ...string) *args {
	return &args{rk: rk, L: L, name: name, base: base, names: names}
}

func (a *args) get(i int) lua.LValue { return a.L.Get(a.base + i) }

func (a *args) bad(i int, format string, v ...any) {
	n := fmt.Sprintf("#%d", i+1)
	if i < len(a.names) {
		n = a.names[i]
	}
	a.rk.fail(a.L, a.name, "bad argument #%d '%s' (%s)", i+1, n, fmt.Sprintf(format, v...))
}

// integer is argument i, an integer >= min up to 2^53.
func (a *args) integer(i int, min int64) int64 {
	n, ok := a.get(i).(lua.LNumber)
	if !ok {
		a.bad(i, "integer expected, got %s", a.get(i).Type())
	}
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f > 1<<53 || f < -(1<<53) {
		a.bad(i, "integer expected, got %v", f)
	}
	if int64(f) < min {
		a.bad(i, "%d is negative", int64(f))
	}
	return int64(f)
}

func (a *args) u64(i int) uint64 { return uint64(a.integer(i, 0)) }

func (a *args) optU64(i int, def uint64) uint64 {
	if a.get(i) == lua.LNil {
		return def
	}
	return a.u64(i)
}

func (a *args) index(i int) int { return int(a.integer(i, math.MinInt64)) }

func (a *args) optIndex(i, def int) int {
	if a.get(i) == lua.LNil {
		return def
	}
	return a.index(i)
}

func (a *args) optStr(i int, def string) string {
	switch v := a.get(i).(type) {
	case *lua.LNilType:
		return def
	case lua.LString:
		return string(v)
	}
	a.bad(i, "string expected, got %s", a.get(i).Type())
	return ""
}

func (a *args) str(i int) string {
	if _, ok := a.get(i).(lua.LString); !ok {
		a.bad(i, "string expected, got %s", a.get(i).Type())
	}
	return a.optStr(i, "")
}

func (a *args) cmp(i int) transport.Cmp {
	k, err := transport.ParseCmp(a.str(i))
	if err != nil {
		a.bad(i, "%v", err)
	}
	return k
}

func (a *args) sigOp(i int, def string) window.SignalOp {
	op, err := window.ParseSignalOp(a.optStr(i, def))
	if err != nil {
		a.bad(i, "%v", err)
	}
	return op
}

func (a *args) dtype(i int) transport.DType {
	t, err := transport.ParseDType(a.optStr(i, "f32"))
	if err != nil {
		a.bad(i, "%v", err)
	}
	return t
}

func (a *args) redop(i int) transport.RedOp {
	op, err := transport.ParseRedOp(a.optStr(i, "sum"))
	if err != nil {
		a.bad(i, "%v", err)
	}
	return op
}

func (a *args) fillKind(i int) transport.FillKind {
	k, err := transport.ParseFill(a.str(i))
	if err != nil {
		a.bad(i, "%v", err)
	}
	return k
}

func (a *args) fillArg(kind transport.FillKind, i int) uint64 {
	v := a.optU64(i, 0)
	if kind == transport.FillConst && v > 255 {
		a.bad(i, "a byte value 0..255 expected, got %d", v)
	}
	if kind == transport.FillIotaU32 && v > math.MaxUint32 {
		a.bad(i, "iota counts 32-bit words: a start of 0..%d expected, got %d", uint64(math.MaxUint32), v)
	}
	return v
}

// buffer is argument i: a buffer, or a window (its data buffer).
func (a *args) buffer(i int) *simBuffer {
	if ud, ok := a.get(i).(*lua.LUserData); ok {
		switch v := ud.Value.(type) {
		case *simBuffer:
			if v.freed {
				a.bad(i, "%s has been freed", v.name)
			}
			return v
		case *simWindow:
			if v.freed {
				a.bad(i, "window %d has been freed", v.num)
			}
			return v.data
		}
	}
	a.bad(i, "buffer or window expected, got %s", a.get(i).Type())
	return nil
}

// field is an integer field of t (def when absent), >= 0.
func (a *args) field(t *lua.LTable, key string, def uint64) uint64 {
	if t == nil {
		return def
	}
	v := t.RawGetString(key)
	if v == lua.LNil {
		return def
	}
	n, ok := v.(lua.LNumber)
	f := float64(n)
	if !ok || f != math.Trunc(f) || f < 0 || f > 1<<53 {
		a.rk.fail(a.L, a.name, "bad argument '%s' (a non-negative integer expected, got %s)", key, lua.LVAsString(v))
	}
	return uint64(f)
}

// strField is a string field of t (def when absent).
func (a *args) strField(t *lua.LTable, key, def string) string {
	if t == nil {
		return def
	}
	switch v := t.RawGetString(key).(type) {
	case *lua.LNilType:
		return def
	case lua.LString:
		return string(v)
	default:
		a.rk.fail(a.L, a.name, "bad argument '%s' (string expected, got %s)", key, v.Type())
	}
	return ""
}

// table is argument i as an options table with only the keys given (nil
// when absent).
func (a *args) table(i int, keys ...string) *lua.LTable {
	v := a.get(i)
	if v == lua.LNil {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		a.bad(i, "table expected, got %s", v.Type())
	}
	allowed := map[string]bool{}
	for _, k := range keys {
		allowed[k] = true
	}
	t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); !ok || !allowed[string(s)] {
			a.rk.fail(a.L, a.name, "unknown option %s", k.String())
		}
	})
	return t
}

// site is the script position that made the call.
func (a *args) site() plan.Site {
	dbg, ok := a.L.GetStack(1)
	if !ok {
		return plan.Site{}
	}
	if _, err := a.L.GetInfo("Sl", dbg, lua.LNil); err != nil {
		return plan.Site{}
	}
	return plan.Site{File: dbg.Source, Line: dbg.CurrentLine}
}

func opFill(kind transport.FillKind, arg uint64) plan.Op {
	return plan.Op{Kind: plan.Fill, FillKind: kind, FillArg: arg}
}
