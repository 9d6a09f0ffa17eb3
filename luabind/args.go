package luabind

import (
	"errors"
	"fmt"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// MaxExact is the largest integer a Lua number holds exactly: 2^53.
const MaxExact = 1 << 53

// call is one invocation of a registered function: it knows the name and
// argument names, so every error it raises names the argument. Records are
// reused once the call returns (State.takeCall): a body must not keep c in
// anything that outlives the call (a wait's failure text, a timer).
type call struct {
	s     *State
	L     *lua.LState
	e     *Entry
	base  int // stack index of the first user argument
	names []string
}

func (c *call) argName(i int) string {
	if i < len(c.names) {
		return c.names[i]
	}
	return fmt.Sprintf("#%d", i+1)
}

// fail raises a Lua error "<pos> rank R: name: msg" (no position, and no
// space before the rank, when no Lua code made the call: pcall(f, ...)).
func (c *call) fail(format string, a ...any) {
	msg := fmt.Sprintf("rank %d: %s: %s", c.s.rank(), c.e.Name, fmt.Sprintf(format, a...))
	if pos := c.position(); pos != "" {
		msg = pos + " " + msg
	}
	c.L.Error(lua.LString(msg), 0)
}

// position is "file:line:" of the innermost Lua function on the stack,
// as Lua's error() would write it, or "".
func (c *call) position() string {
	for level := 0; ; level++ {
		dbg, ok := c.L.GetStack(level)
		if !ok {
			return ""
		}
		if _, err := c.L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			return ""
		}
		if dbg.What != "G" && dbg.CurrentLine > 0 {
			return fmt.Sprintf("%s:%d:", dbg.Source, dbg.CurrentLine)
		}
	}
}

// check raises err (if any) with the call's context.
func (c *call) check(err error) {
	if err == nil {
		return
	}
	var ae *window.ArgError
	if errors.As(err, &ae) {
		c.fail("bad argument '%s' (%s)", ae.Arg, ae.Msg)
	}
	c.s.raised = err
	c.fail("%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("rank %d: ", c.s.rank())))
}

func (c *call) badArg(i int, format string, a ...any) {
	c.fail("bad argument #%d '%s' (%s)", i+1, c.argName(i), fmt.Sprintf(format, a...))
}

func (c *call) get(i int) lua.LValue { return c.L.Get(c.base + i) }

func (c *call) present(i int) bool { return c.get(i) != lua.LNil }

// integer returns argument i as an integer in [min, MaxExact].
func (c *call) integer(i int, min int64) int64 {
	v := c.get(i)
	n, ok := v.(lua.LNumber)
	if !ok {
		c.badArg(i, "integer expected, got %s", v.Type())
	}
	return c.checkInt(i, float64(n), min)
}

func (c *call) checkInt(i int, f float64, min int64) int64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		c.badArg(i, "integer expected, got %v", f)
	}
	if f > MaxExact || f < -MaxExact {
		c.badArg(i, "%.0f is beyond 2^53 and cannot be represented exactly", f)
	}
	if int64(f) < min {
		c.badArg(i, "%d is negative", int64(f))
	}
	return int64(f)
}

// u64 is a non-negative integer argument.
func (c *call) u64(i int) uint64 { return uint64(c.integer(i, 0)) }

// optU64 is u64 with a default for nil.
func (c *call) optU64(i int, def uint64) uint64 {
	if !c.present(i) {
		return def
	}
	return c.u64(i)
}

// index is an id-like integer (peer, sig, ctr); negative values reach the
// window layer, which reports the valid range.
func (c *call) index(i int) int { return int(c.integer(i, math.MinInt64)) }

func (c *call) optIndex(i int, def int) int {
	if !c.present(i) {
		return def
	}
	return c.index(i)
}

func (c *call) str(i int) string {
	v := c.get(i)
	s, ok := v.(lua.LString)
	if !ok {
		c.badArg(i, "string expected, got %s", v.Type())
	}
	return string(s)
}

func (c *call) optStr(i int, def string) string {
	if !c.present(i) {
		return def
	}
	return c.str(i)
}

func (c *call) cmp(i int) transport.Cmp {
	k, err := transport.ParseCmp(c.str(i))
	if err != nil {
		c.badArg(i, "%v", err)
	}
	return k
}

func (c *call) sigOp(i int, def string) window.SignalOp {
	op, err := window.ParseSignalOp(c.optStr(i, def))
	if err != nil {
		c.badArg(i, "%v", err)
	}
	return op
}

// userdata returns argument i's userdata value or nil.
func (c *call) userdata(i int) any {
	if ud, ok := c.get(i).(*lua.LUserData); ok {
		return ud.Value
	}
	return nil
}

// buffer accepts a buffer or a window (its data buffer).
func (c *call) buffer(i int) *window.Buffer {
	switch v := c.userdata(i).(type) {
	case *bufferRef:
		if v.b.Freed() {
			c.badArg(i, "%s has been freed", v.b.Name())
		}
		return v.b
	case *windowRef:
		if v.w.Freed() {
			c.badArg(i, "window %d has been freed", v.w.ID())
		}
		return v.w.Buffer()
	}
	c.badArg(i, "buffer or window expected, got %s", c.get(i).Type())
	return nil
}
