package luabind

import (
	"fmt"
	"math"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// tableArg returns argument i as an options table whose keys are all in
// keys (nil when absent and optional).
func (c *call) tableArg(i int, keys []string, example string, optional bool) *lua.LTable {
	v := c.get(i)
	if v == lua.LNil && optional {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		c.badArg(i, "table expected, e.g. %s, got %s", example, v.Type())
	}
	var unknown []string
	t.ForEach(func(k, _ lua.LValue) {
		ks, isStr := k.(lua.LString)
		found := false
		for _, name := range keys {
			if isStr && string(ks) == name {
				found = true
			}
		}
		if !found {
			unknown = append(unknown, k.String())
		}
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		c.fail("bad argument '%s' (unknown option; the options are %s)", unknown[0], strings.Join(keys, ", "))
	}
	return t
}

// field returns t[name] as a non-negative integer, or def.
func (c *call) field(t *lua.LTable, name string, def uint64) uint64 {
	if t == nil {
		return def
	}
	v := t.RawGetString(name)
	if v == lua.LNil {
		return def
	}
	n, ok := v.(lua.LNumber)
	if !ok {
		got := v.Type().String()
		if s, isStr := v.(lua.LString); isStr {
			got = fmt.Sprintf("string %q", string(s))
		}
		c.fail("bad argument '%s' (a non-negative integer up to 2^53 expected, got %s)", name, got)
	}
	f := float64(n)
	if f != float64(int64(f)) || f < 0 || f > MaxExact {
		c.fail("bad argument '%s' (a non-negative integer up to 2^53 expected, got %s)", name, lua.LVAsString(v))
	}
	return uint64(f)
}

func (c *call) strField(t *lua.LTable, name, def string) string {
	if t == nil {
		return def
	}
	v := t.RawGetString(name)
	if v == lua.LNil {
		return def
	}
	s, ok := v.(lua.LString)
	if !ok {
		c.fail("bad argument '%s' (string expected, got %s)", name, v.Type())
	}
	return string(s)
}

// windowField checks that t.window, when given, is the plan's window.
func (c *call) windowField(t *lua.LTable, p *plan.Plan) {
	if t == nil {
		return
	}
	v := t.RawGetString("window")
	if v == lua.LNil {
		return
	}
	var wr *windowRef
	if ud, ok := v.(*lua.LUserData); ok {
		wr, _ = ud.Value.(*windowRef)
	}
	if wr == nil {
		c.fail("bad argument 'window' (window expected, got %s)", v.Type())
	}
	if wr.w != p.Window() {
		c.fail("bad argument 'window' (the plan was recorded on window %d and runs on it only; window %d given)", p.Window().ID(), wr.w.ID())
	}
}

// IsPlanOpts reports whether v is lc.plan's trailing options table: a
// plain table whose keys are all plan options.
func IsPlanOpts(v lua.LValue) bool {
	t, ok := v.(*lua.LTable)
	if !ok {
		return false
	}
	n, only := 0, true
	t.ForEach(func(k, _ lua.LValue) {
		n++
		ks, isStr := k.(lua.LString)
		if !isStr || string(ks) != "mode" {
			only = false
		}
	})
	return n > 0 && only
}

// fillKind and fillArg are b:fill's argument checks.
func (c *call) fillKind(i int) transport.FillKind {
	kind, err := transport.ParseFill(c.str(i))
	if err != nil {
		c.badArg(i, "%v", err)
	}
	return kind
}

func (c *call) fillArg(kind transport.FillKind, i int) uint64 {
	arg := c.optU64(i, 0)
	if kind == transport.FillConst && arg > 255 {
		c.badArg(i, "a byte value 0..255 expected, got %d", arg)
	}
	if kind == transport.FillIotaU32 && arg > math.MaxUint32 {
		c.badArg(i, "iota counts 32-bit words: a start of 0..%d expected, got %d", uint64(math.MaxUint32), arg)
	}
	return arg
}
