package luabind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/plan/cost"
	"github.com/luacoll/luacoll/scripts"
	"github.com/luacoll/luacoll/window"
)

// Version is luacoll's version, set by main.
var Version = "dev"

// LuaVersion names the Lua dialect and the interpreter module's version.
func LuaVersion() string {
	v := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/yuin/gopher-lua" {
				v = d.Version
			}
		}
	}
	return lua.LuaVersion + " (gopher-lua " + v + ")"
}

// State is one rank's Lua interpreter bound to its Comm.
type State struct {
	L    *lua.LState
	Comm *engine.Comm
	Reg  *Registry
	// Ctx bounds blocking calls (sync, collectives); cancelling it interrupts them.
	Ctx context.Context
	// PlanMode is the mode SchedulePlan asks for ("" or "auto": the
	// backend's choice); PlanModes records the mode each size's plan got.
	PlanMode  string
	PlanModes map[uint64]string
	// CostModel, when set, is the model SchedulePlan predicts each plan's
	// time with (nil: the one shipped for the backend, if any);
	// PlanPredicted holds the predicted seconds per exec by chunk size.
	CostModel     *cost.Model
	PlanPredicted map[uint64]float64

	Out io.Writer
	// Prefix is prepended to lc.log lines when the launcher does not
	// prefix output itself.
	Prefix string
	start  time.Time
	timers []*timerRef
	cur    *lua.LState // the thread running the current call (pcall runs on its own)
	// spare holds call records of finished calls, for reuse.
	spare []*call
	// calls counts calls of registered functions (see checkStream).
	calls uint64
	plans planState
	// Exit, when set, ends the rank for os.exit(code) called at where
	// (a script position): it tells the others and does not return.
	// Unset, os.exit is Lua's own.
	Exit func(code int, where string)
	// Exec holds chunks Run runs before the script, in order, each named
	// "(command line)" (run -e CODE, as lua -e).
	Exec []string
	// raised is the last Go error a call raised into Lua (ScriptError's
	// Cause).
	raised error
}

// NewRegistry returns the registry of every Lua function and method.
func NewRegistry() *Registry {
	return newRegistry(rankEntries(), bufferEntries(), windowEntries(), timerEntries(), agpEntries(), planEntries(), planEstimateEntries(), reduceEntries(), helpEntries())
}

// New makes a Lua state for comm. out receives print and lc.log output.
func New(comm *engine.Comm, out io.Writer) *State {
	L := lua.NewState(lua.Options{RegistryMaxSize: 1024 * 1024, CallStackSize: 1024})
	s := &State{L: L, Comm: comm, Reg: NewRegistry(), Ctx: context.Background(), Out: out, start: time.Now()}
	if !comm.Env.Prefixed {
		s.Prefix = fmt.Sprintf("[%d] ", comm.Env.Rank)
	}
	s.cur = L
	comm.Rank.Site = func() window.Site {
		// What L.Where(1) says, unformatted (waits record one each time).
		dbg, ok := s.cur.GetStack(1)
		if !ok {
			return window.Site{}
		}
		if _, err := s.cur.GetInfo("Sl", dbg, lua.LNil); err != nil {
			return window.Site{}
		}
		return window.Site{File: dbg.Source, Line: dbg.CurrentLine}
	}
	comm.Rank.Context = func() context.Context { return s.Ctx }
	GuardStdlib(L)
	s.install()
	return s
}

// writeLines prints text, each line prefixed when the launcher does not
// prefix output itself.
func (s *State) writeLines(text string) {
	if s.Prefix == "" {
		fmt.Fprintln(s.Out, text)
		return
	}
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(s.Prefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	io.WriteString(s.Out, b.String())
}

// Close releases the interpreter (not the Comm).
func (s *State) Close() {
	for r := range s.plans.onDevice {
		_ = r.p.Free()
	}
	s.plans.onDevice = nil
	s.L.Close()
}

func (s *State) rank() int { return s.Comm.Env.Rank }

// wrap turns an entry into a Lua function.
func (s *State) wrap(e *Entry) *lua.LFunction {
	return s.wrapMethod(e, nil)
}

// wrapMethod is wrap for a method whose receiver's metatable is mt.
func (s *State) wrapMethod(e *Entry, mt lua.LValue) *lua.LFunction {
	return s.L.NewFunction(func(L *lua.LState) int { return e.fn(s, L, mt) })
}

// takeCall returns a call record to fill, reusing one a finished call
// gave back (calls nest when Lua calls Go calls Lua: each has its own).
func (s *State) takeCall() *call {
	if n := len(s.spare); n > 0 {
		c := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return c
	}
	return new(call)
}

// endCall ends a call (also when it raised an error): the running thread
// goes back to prev and c to the spares.
func (s *State) endCall(c *call, prev *lua.LState) {
	s.cur = prev
	*c = call{}
	s.spare = append(s.spare, c)
}

func (s *State) install() {
	L := s.L
	mod := L.NewTable()
	for _, e := range s.Reg.entries {
		switch {
		case e.Field:
			// filled below
		case strings.HasPrefix(e.Name, "lc."):
			L.SetField(mod, e.Short(), s.wrap(e))
		case e.Receiver() == "":
			L.SetGlobal(e.Name, s.wrap(e))
		}
	}
	env := s.Comm.Env
	L.SetField(mod, "rank", lua.LNumber(env.Rank))
	L.SetField(mod, "size", lua.LNumber(env.Size))
	L.SetField(mod, "local_rank", lua.LNumber(env.LocalRank))
	L.SetField(mod, "local_size", lua.LNumber(env.LocalSize))
	L.SetField(mod, "node", lua.LNumber(env.Node))
	L.SetField(mod, "version", lua.LString(Version))
	for recv, r := range receivers {
		mt := L.NewTypeMetatable(r.typ)
		methods := L.NewTable()
		for _, e := range s.Reg.Methods(recv) {
			L.SetField(methods, e.Short(), s.wrapMethod(e, mt))
		}
		guardMissing(L, methods, r.what, "method")
		L.SetField(mt, "__index", methods)
		L.SetField(mt, "__tostring", L.NewFunction(tostring))
	}
	guardMissing(L, mod, "luacoll (lc)", "field")
	L.SetGlobal("luacoll", mod)
	L.SetGlobal("lc", mod) // as the docs and the REPL write it
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		n := L.GetTop()
		parts := make([]string, n)
		for i := 1; i <= n; i++ {
			parts[i-1] = L.ToStringMeta(L.Get(i)).String()
		}
		s.writeLines(strings.Join(parts, "\t"))
		return 0
	}))
	if oslib, ok := L.GetGlobal("os").(*lua.LTable); ok {
		luaExit := L.GetField(oslib, "exit")
		L.SetField(oslib, "exit", L.NewFunction(func(L *lua.LState) int {
			if s.Exit == nil {
				L.Push(luaExit)
				L.Push(L.Get(1))
				L.Call(1, 0)
				return 0
			}
			code := ExitStatus(L.Get(1))
			s.Exit(code, strings.TrimSuffix(L.Where(1), ":"))
			return 0
		}))
	}
	L.PreloadModule("luacoll", func(L *lua.LState) int { L.Push(mod); return 1 })
	s.installRequire()
	installPcall(L)
	installToNumber(L)
	installRandom(L)
}

func tostring(L *lua.LState) int {
	ud := L.CheckUserData(1)
	if st, ok := ud.Value.(fmt.Stringer); ok {
		L.Push(lua.LString(st.String()))
	} else {
		L.Push(lua.LString(fmt.Sprintf("%T", ud.Value)))
	}
	return 1
}

// installRequire lets require find embedded scripts/lib modules after the
// files next to the script.
func (s *State) installRequire() { InstallRequire(s.L, nil) }

// InstallRequire lets require on L find the embedded scripts/lib modules
// after the files next to the script. cache, when not nil, keeps each
// module compiled once for every state that shares it.
func InstallRequire(L *lua.LState, cache map[string]*lua.FunctionProto) {
	pkg := L.GetGlobal("package").(*lua.LTable)
	loaders, ok := L.GetField(pkg, "loaders").(*lua.LTable)
	if !ok {
		return
	}
	loaders.Append(L.NewFunction(func(L *lua.LState) int {
		name := L.CheckString(1)
		rel := strings.ReplaceAll(strings.TrimPrefix(name, "lib."), ".", "/")
		path := "lib/" + rel + ".lua"
		proto, ok := cache[path]
		if !ok {
			src, err := fs.ReadFile(scripts.FS, path)
			if err != nil {
				L.Push(lua.LString("\n\tno embedded module '" + path + "'"))
				return 1
			}
			if proto, err = CompileChunk(src, path); err != nil {
				L.RaiseError("loading embedded %s: %v", path, err)
			}
			if cache != nil {
				cache[path] = proto
			}
		}
		L.Push(L.NewFunctionFromProto(proto))
		return 1
	}))
}

// CompileScript compiles a script file's source as Run loads it: past a
// UTF-8 byte-order mark and a first line that starts with # (scriptText).
func CompileScript(src []byte, name string) (*lua.FunctionProto, error) {
	return CompileChunk(scriptText(src), name)
}

// CompileChunk parses and compiles a chunk of Lua source named name.
func CompileChunk(src []byte, name string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(bytes.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	return lua.Compile(chunk, name)
}

// SetScriptDir makes require look next to the script first.
func (s *State) SetScriptDir(dir string) {
	pkg := s.L.GetGlobal("package").(*lua.LTable)
	p := filepath.Join(dir, "?.lua") + ";" + filepath.Join(dir, "?", "init.lua")
	s.L.SetField(pkg, "path", lua.LString(p+";"+lua.LVAsString(s.L.GetField(pkg, "path"))))
}

// LoadScript reads a script from disk, or from the embedded scripts when
// the path is not a file (e.g. "examples/tour.lua").
func LoadScript(path string) (src []byte, name string, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, path, nil
	}
	if !os.IsNotExist(err) {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	rel := strings.TrimPrefix(filepath.ToSlash(path), "scripts/")
	if e, eerr := fs.ReadFile(scripts.FS, rel); eerr == nil {
		return e, rel, nil
	}
	return nil, "", fmt.Errorf("script %s: no such file (nor an embedded script of that name)", path)
}

// ReadScript is LoadScript where "-" means standard input (named
// "stdin", as lua - does).
func ReadScript(path string, stdin io.Reader) (src []byte, name string, err error) {
	if path != "-" {
		return LoadScript(path)
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, "", fmt.Errorf("reading the script from standard input: %w", err)
	}
	return b, "stdin", nil
}

// Run runs a script's source as the main chunk with arg set to args.
func (s *State) Run(src []byte, name string, args []string) error {
	L := s.L
	argt := L.NewTable()
	argt.RawSetInt(0, lua.LString(name))
	for i, a := range args {
		argt.RawSetInt(i+1, lua.LString(a))
	}
	L.SetGlobal("arg", argt)
	if dir := filepath.Dir(name); dir != "" {
		s.SetScriptDir(dir)
	}
	text := scriptText(src)
	fn, err := L.Load(bytes.NewReader(text), name)
	if err != nil {
		// As lua words it ("s.lua:2: ... near 'x'"), on one line.
		return fmt.Errorf("rank %d: %w", s.rank(), syntaxError(err, string(text), name))
	}
	// Let an interrupt or a peer's failure stop a script that is busy in
	// Lua code, not only one blocked in a wait.
	L.SetContext(s.Ctx)
	defer L.RemoveContext()
	for _, code := range s.Exec {
		f, err := L.Load(strings.NewReader(code), ExecName)
		if err != nil {
			return fmt.Errorf("rank %d: %w", s.rank(), syntaxError(err, code, ExecName))
		}
		L.Push(f)
		if err := s.runError(L.PCall(0, 0, nil)); err != nil {
			return err
		}
	}
	L.Push(fn)
	for _, a := range args {
		L.Push(lua.LString(a))
	}
	return s.runError(L.PCall(len(args), lua.MultRet, nil))
}

// ExecName is what messages call a chunk given with -e.
const ExecName = "(command line)"

// runError is the error of a chunk that Run called (nil for none).
func (s *State) runError(err error) error {
	if err == nil {
		return nil
	}
	if ae, ok := err.(*lua.ApiError); ok && ae.Type == lua.ApiErrorRun {
		if msg := s.valueError(ae); msg != "" {
			return &ScriptError{Msg: msg, Trace: ae.StackTrace}
		}
	}
	return s.withCause(scriptError(err))
}

// DoString runs a chunk (the REPL uses it).
func (s *State) DoString(chunk, name string) error {
	fn, err := s.L.Load(strings.NewReader(chunk), name)
	if err != nil {
		return err
	}
	s.L.Push(fn)
	return scriptError(s.L.PCall(0, lua.MultRet, nil))
}

// ScriptError is a Lua error raised by a script, with its message as Lua
// shows it (position, rank, call).
type ScriptError struct {
	Msg   string
	Trace string
	// Cause is the Go error a luacoll call raised that the message
	// carries (a wait's timeout, say), when there is one.
	Cause error
}

func (e *ScriptError) Error() string { return e.Msg }

// Unwrap returns the Go error behind the message, or nil.
func (e *ScriptError) Unwrap() error { return e.Cause }

// withCause sets err's Cause to the last Go error a luacoll call raised,
// when err's message still carries it (not one a pcall caught before).
func (s *State) withCause(err error) error {
	var se *ScriptError
	if s.raised == nil || !errors.As(err, &se) || se.Cause != nil {
		return err
	}
	if strings.Contains(se.Msg, strings.TrimPrefix(s.raised.Error(), fmt.Sprintf("rank %d: ", s.rank()))) {
		se.Cause = s.raised
	}
	return err
}

func scriptError(err error) error {
	if err == nil {
		return nil
	}
	if ae, ok := err.(*lua.ApiError); ok {
		msg := ae.Object.String()
		if ae.Type == lua.ApiErrorSyntax {
			if pe, ok := ae.Cause.(*parse.Error); ok {
				msg = fmt.Sprintf("%s:%d: %s", pe.Pos.Source, pe.Pos.Line, pe.Message)
			}
		}
		return &ScriptError{Msg: msg, Trace: ae.StackTrace}
	}
	return err
}

// windowRef, bufferRef are the userdata values.
type windowRef struct {
	w    *window.Window
	call string
}

func (r *windowRef) String() string {
	if r.w.Freed() {
		return fmt.Sprintf("window %d (freed)", r.w.ID())
	}
	return fmt.Sprintf("window %d (%d bytes)", r.w.ID(), r.w.Options().Bytes)
}

type bufferRef struct{ b *window.Buffer }

func (r *bufferRef) String() string {
	if r.b.Freed() {
		return r.b.Name() + " (freed)"
	}
	return fmt.Sprintf("%s (%d bytes)", r.b.Name(), r.b.Size())
}

func (s *State) push(v any, recv string) {
	// Push onto the thread running the call (pcall runs on its own).
	L := s.cur
	ud := L.NewUserData()
	ud.Value = v
	L.SetMetatable(ud, L.GetTypeMetatable(receivers[recv].typ))
	L.Push(ud)
}

// ExitStatus is the status os.exit(v) asks for, as Lua's: a number is
// itself, false is 1, true and nothing are 0.
func ExitStatus(v lua.LValue) int {
	switch v := v.(type) {
	case lua.LNumber:
		return int(v)
	case lua.LBool:
		if !v {
			return 1
		}
	}
	return 0
}
