package simrank

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/luabind"
	"github.com/luacoll/luacoll/window"
)

// rank is one simulated rank: its Lua state and what its script made.
type rank struct {
	w       *world
	r       int
	L       *lua.LState
	windows int // made so far (a window's number is its order)
	buffers int
	made    int // plans made so far
	rec     *recorder
	// env holds the modules and the recorder arrays the rank reuses.
	env *rankEnv
	// shadow, when set, makes this rank 0's shadow (spec.go): it records
	// and prints nothing, and verifies and estimates nothing.
	shadow *shadowRec
	// exit, once the script called os.exit, ends the rank's run (stop
	// cancels its context) with exited: nil for a status of 0, as if
	// the script had ended there.
	stop   context.CancelCauseFunc
	exit   bool
	exited error
}

// lead reports whether rk is rank 0 itself, which verifies every rank's
// lists and prints.
func (rk *rank) lead() bool { return rk.r == 0 && rk.shadow == nil }

// Userdata values.
type (
	simWindow struct {
		num   int
		opts  window.Options
		freed bool
		data  *simBuffer // the window's data buffer (w:buffer())
	}
	simBuffer struct {
		name  string
		size  uint64
		win   *simWindow // set for a window's data buffer
		freed bool
	}
)

func (b *simBuffer) String() string { return fmt.Sprintf("%s (%d bytes, simulated)", b.name, b.size) }
func (w *simWindow) String() string {
	return fmt.Sprintf("window %d (%d bytes, simulated)", w.num, w.opts.Bytes)
}

// Metatable names of the userdata types.
const (
	mtWindow = "luacoll.sim.window"
	mtBuffer = "luacoll.sim.buffer"
	mtPlan   = "luacoll.sim.plan"
)

func newRank(w *world, r int, env *rankEnv) *rank {
	L := lua.NewState(lua.Options{CallStackSize: 256, MinimizeStackMemory: true})
	rk := &rank{w: w, r: r, L: L, env: env}
	luabind.GuardStdlib(L)
	rk.install()
	rk.installExit()
	if r != 0 {
		rk.quietIO()
	}
	return rk
}

// quietIO drops what io.write writes, as print drops the output of every
// rank but 0: the others run side by side, and a thousand copies would
// drown the reports.
func (rk *rank) quietIO() {
	if t, ok := rk.L.GetGlobal("io").(*lua.LTable); ok {
		rk.L.SetField(t, "write", rk.L.NewFunction(func(L *lua.LState) int {
			L.Push(t)
			return 1
		}))
	}
}

func (rk *rank) close() { rk.L.Close() }

// print writes a line of rank 0's output (the other ranks' is dropped: a
// thousand copies of it would drown the reports).
func (rk *rank) print(text string) {
	if !rk.lead() {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		fmt.Fprintf(rk.w.out, "[0] %s\n", line)
	}
}

// run runs the script's main chunk.
func (rk *rank) run(ctx context.Context) error {
	o := rk.w.o
	L := rk.L
	argt := L.NewTable()
	argt.RawSetInt(0, lua.LString(o.Name))
	for i, a := range o.Args {
		argt.RawSetInt(i+1, lua.LString(a))
	}
	L.SetGlobal("arg", argt)
	if dir := filepath.Dir(o.Name); dir != "" {
		pkg := L.GetGlobal("package").(*lua.LTable)
		p := filepath.Join(dir, "?.lua") + ";" + filepath.Join(dir, "?", "init.lua")
		L.SetField(pkg, "path", lua.LString(p+";"+lua.LVAsString(L.GetField(pkg, "path"))))
	}
	fn := L.NewFunctionFromProto(rk.w.main)
	ctx, rk.stop = context.WithCancelCause(ctx)
	defer rk.stop(nil)
	L.SetContext(ctx)
	defer L.RemoveContext()
	L.Push(fn)
	for _, a := range o.Args {
		L.Push(lua.LString(a))
	}
	if err := L.PCall(len(o.Args), lua.MultRet, nil); err != nil {
		if rk.exit {
			return rk.exited
		}
		if ae, ok := err.(*lua.ApiError); ok {
			return fmt.Errorf("%s", ae.Object.String())
		}
		return err
	}
	return nil
}

// installExit replaces os.exit, which would end the whole check: it ends
// this rank's script, as the end of the script would for a status of 0
// (true, or none) and as a failure naming the status and line otherwise.
func (rk *rank) installExit() {
	t, ok := rk.L.GetGlobal("os").(*lua.LTable)
	if !ok {
		return
	}
	rk.L.SetField(t, "exit", rk.L.NewFunction(func(L *lua.LState) int {
		code := luabind.ExitStatus(L.Get(1))
		rk.exit = true
		if code != 0 {
			rk.exited = fmt.Errorf("exited early with os.exit(%d) at %s", code, strings.TrimSuffix(L.Where(1), ":"))
		}
		if rk.stop != nil {
			rk.stop(errors.New("os.exit"))
		}
		L.RaiseError("os.exit")
		return 0
	}))
}

// fail raises "rank R: name: msg" at the script's position.
func (rk *rank) fail(L *lua.LState, name, format string, a ...any) {
	L.RaiseError("rank %d: %s: %s", rk.r, name, fmt.Sprintf(format, a...))
}

// needsReal refuses name: what it does needs real ranks.
func (rk *rank) needsReal(L *lua.LState, name string) {
	L.RaiseError("check --simulate: %s needs real ranks (simulated ranks hold no data and run nothing: use it under luacoll run, or check without --layout)", name)
}

// install makes the lc module and the userdata metatables.
func (rk *rank) install() {
	L := rk.L
	o := rk.w.o
	mod := L.NewTable()
	for name, f := range rk.functions() {
		L.SetField(mod, name, L.NewFunction(f))
	}
	L.SetField(mod, "rank", lua.LNumber(rk.r))
	L.SetField(mod, "size", lua.LNumber(o.Ranks))
	L.SetField(mod, "local_rank", lua.LNumber(rk.r%o.PerNode))
	L.SetField(mod, "local_size", lua.LNumber(o.PerNode))
	L.SetField(mod, "node", lua.LNumber(rk.r/o.PerNode))
	L.SetField(mod, "version", lua.LString("simulated"))
	rk.guard(mod, "lc.", "luacoll (lc) has no field ")
	for _, t := range []struct {
		name, prefix string
		methods      map[string]lua.LGFunction
	}{{mtWindow, "w:", rk.windowMethods()}, {mtBuffer, "b:", rk.bufferMethods()}, {mtPlan, "p:", rk.planMethods()}} {
		mt := L.NewTypeMetatable(t.name)
		methods := L.NewTable()
		for name, f := range t.methods {
			L.SetField(methods, name, L.NewFunction(f))
		}
		rk.guard(methods, t.prefix, "no method ")
		L.SetField(mt, "__index", methods)
		L.SetField(mt, "__tostring", L.NewFunction(func(L *lua.LState) int {
			L.Push(lua.LString(fmt.Sprint(L.CheckUserData(1).Value)))
			return 1
		}))
	}
	L.SetGlobal("luacoll", mod)
	L.SetGlobal("lc", mod)
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		parts := make([]string, L.GetTop())
		for i := range parts {
			parts[i] = L.ToStringMeta(L.Get(i + 1)).String()
		}
		rk.print(strings.Join(parts, "\t"))
		return 0
	}))
	L.PreloadModule("luacoll", func(L *lua.LState) int { L.Push(mod); return 1 })
	rk.installRequire()
}

// guard makes a missing field of t an error: "needs real ranks" for a
// name real ranks have (prefix+key in Options.Real), else no such field.
func (rk *rank) guard(t *lua.LTable, prefix, missing string) {
	L := rk.L
	mt := L.NewTable()
	L.SetField(mt, "__index", L.NewFunction(func(L *lua.LState) int {
		key, ok := L.Get(2).(lua.LString)
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		if rk.w.real[prefix+string(key)] {
			rk.needsReal(L, prefix+string(key))
		}
		L.RaiseError("%s%s", missing, string(key))
		return 0
	}))
	L.SetMetatable(t, mt)
}

// installRequire lets require find the embedded scripts/lib modules after
// the files next to the script, each compiled once for every simulated
// rank.
func (rk *rank) installRequire() { luabind.InstallRequire(rk.L, rk.env.libs) }

// push pushes v as userdata of metatable mt.
func (rk *rank) push(L *lua.LState, v any, mt string) {
	ud := L.NewUserData()
	ud.Value = v
	L.SetMetatable(ud, L.GetTypeMetatable(mt))
	L.Push(ud)
}

// functions are the lc functions simulated ranks have.
func (rk *rank) functions() map[string]lua.LGFunction {
	o := rk.w.o
	noop := func(L *lua.LState) int { return 0 }
	return map[string]lua.LGFunction{
		"window": rk.newWindow,
		"buffer": func(L *lua.LState) int {
			a := rk.args(L, "lc.buffer", 1, "nbytes")
			n := a.u64(0)
			rk.buffers++
			rk.push(L, &simBuffer{name: fmt.Sprintf("buffer %d", rk.buffers), size: n}, mtBuffer)
			return 1
		},
		"plan": rk.newPlan,
		"nodes": func(L *lua.LState) int {
			t, groups := L.NewTable(), L.NewTable()
			for g := 0; g < o.Ranks/o.PerNode; g++ {
				members := L.CreateTable(o.PerNode, 0)
				for i := 0; i < o.PerNode; i++ {
					members.Append(lua.LNumber(g*o.PerNode + i))
				}
				groups.Append(members)
			}
			t.RawSetString("groups", groups)
			t.RawSetString("node", lua.LNumber(rk.r/o.PerNode+1))
			t.RawSetString("local_index", lua.LNumber(rk.r%o.PerNode+1))
			L.Push(t)
			return 1
		},
		// Nothing is in flight between simulated ranks: syncs and barriers
		// have nothing to wait for.
		"sync":    noop,
		"barrier": noop,
		"log": func(L *lua.LState) int {
			format := L.GetField(L.GetGlobal("string"), "format")
			n := L.GetTop()
			L.Push(format)
			for i := 1; i <= n; i++ {
				L.Push(L.Get(i))
			}
			L.Call(n, 1)
			rk.print(L.ToString(-1))
			L.Pop(1)
			return 0
		},
	}
}

// newWindow is lc.window{bytes, signals, counters, barriers, ...}: a shape.
func (rk *rank) newWindow(L *lua.LState) int {
	const name = "lc.window"
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		rk.fail(L, name, "bad argument #1 (table expected, got %s)", L.Get(1).Type())
	}
	opts := window.DefaultOptions()
	known := map[string]bool{"bytes": true, "signals": true, "counters": true, "barriers": true, "timeout_ms": true, "path": true, "ipc": true, "symmetric": true}
	var bad []string
	t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); !ok || !known[string(s)] {
			bad = append(bad, k.String())
		}
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		rk.fail(L, name, "unknown option %s", strings.Join(bad, ", "))
	}
	a := rk.args(L, name, 1)
	opts.Bytes = a.field(t, "bytes", 0)
	opts.Signals = int(a.field(t, "signals", uint64(opts.Signals)))
	opts.Counters = int(a.field(t, "counters", uint64(opts.Counters)))
	opts.Barriers = int(a.field(t, "barriers", uint64(opts.Barriers)))
	if err := opts.Validate(); err != nil {
		rk.fail(L, name, "%v", err)
	}
	if opts.Bytes == 0 {
		rk.fail(L, name, "bad argument 'bytes' (a window needs at least 1 byte)")
	}
	rk.windows++
	sw := &simWindow{num: rk.windows, opts: opts}
	sw.data = &simBuffer{name: fmt.Sprintf("window %d's buffer", sw.num), size: opts.Bytes, win: sw}
	rk.push(L, sw, mtWindow)
	return 1
}

// bufferMethods are a buffer's methods under simulation.
func (rk *rank) bufferMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		"size": func(L *lua.LState) int {
			L.Push(lua.LNumber(rk.bufArg(L, "b:size").size))
			return 1
		},
		"fill": func(L *lua.LState) int {
			b := rk.bufArg(L, "b:fill")
			if rk.rec == nil {
				// Outside a plan a fill writes data nothing reads.
				return 0
			}
			a := rk.args(L, "b:fill", 2, "kind", "arg")
			kind := a.fillKind(0)
			return rk.rec.record(rk, a, nil, b, nil, opFill(kind, a.fillArg(kind, 1)))
		},
		"free": func(L *lua.LState) int {
			rk.bufArg(L, "b:free").freed = true
			return 0
		},
	}
}

func (rk *rank) bufArg(L *lua.LState, name string) *simBuffer {
	b, ok := L.CheckUserData(1).Value.(*simBuffer)
	if !ok {
		rk.fail(L, name, "a buffer expected")
	}
	if b.freed {
		rk.fail(L, name, "%s has been freed", b.name)
	}
	return b
}
