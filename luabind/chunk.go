package luabind

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Eval runs one interactive chunk the way `lua -i` does: when "return " +
// chunk compiles, the chunk is an expression (or a call) and its values are
// returned, formatted with tostring (strings as they are, nil as "nil");
// otherwise the chunk runs as statements and returns no values. As in Lua
// 5.1, a chunk "=expr" is "return expr".
//
// ctx bounds the chunk: cancelling it ends blocking calls (sync,
// collectives, the stream waits they drive) and stops pure Lua code too.
// When ctx was cancelled with a cause, the error names the cause instead of
// "context canceled". Errors are *ScriptError, with positions relative to
// name (e.g. "stdin:1:").
func (s *State) Eval(ctx context.Context, chunk, name string) (values []string, err error) {
	L := s.L
	chunk = expandEquals(chunk)
	fn, lerr := L.Load(strings.NewReader("return "+chunk), name)
	if lerr != nil {
		fn, lerr = L.Load(strings.NewReader(chunk), name)
		if lerr != nil {
			return nil, syntaxError(lerr, chunk, name)
		}
	}
	return s.call(ctx, fn, nil)
}

// EvalScript runs a script's source the way `lua -i script args` does (and
// the REPL's :load): the global arg holds name at 0 and args from 1, the
// chunk gets args as its ..., and the values it returns are formatted as
// Eval's. A file's folder is searched first by require, as for `luacoll
// run`.
func (s *State) EvalScript(ctx context.Context, src, name string, args []string) ([]string, error) {
	L := s.L
	fn, lerr := L.Load(strings.NewReader(src), name)
	if lerr != nil {
		return nil, syntaxError(lerr, src, name)
	}
	argt := L.NewTable()
	argt.RawSetInt(0, lua.LString(name))
	for i, a := range args {
		argt.RawSetInt(i+1, lua.LString(a))
	}
	L.SetGlobal("arg", argt)
	if dir := filepath.Dir(name); dir != "." && dir != "" {
		s.SetScriptDir(dir)
	}
	return s.call(ctx, fn, args)
}

// call runs fn with args under ctx and formats what it returns.
func (s *State) call(ctx context.Context, fn *lua.LFunction, args []string) ([]string, error) {
	L := s.L
	if ctx == nil {
		ctx = context.Background()
	}
	oldCtx := s.Ctx
	s.Ctx = ctx
	L.SetContext(ctx)
	defer func() {
		L.RemoveContext()
		s.Ctx = oldCtx
	}()
	top := L.GetTop()
	L.Push(fn)
	for _, a := range args {
		L.Push(lua.LString(a))
	}
	if perr := L.PCall(len(args), lua.MultRet, nil); perr != nil {
		L.SetTop(top)
		return nil, causeOf(ctx, scriptError(perr))
	}
	n := L.GetTop() - top
	values := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		values = append(values, s.formatValue(L.Get(top+i)))
	}
	L.SetTop(top)
	return values, nil
}

// ChunkSyntax reports the syntax error Eval would raise for chunk (nil
// when it compiles as an expression or as statements), without running
// anything: the REPL checks a chunk once before sending it to every rank.
func ChunkSyntax(chunk, name string) error {
	chunk = expandEquals(chunk)
	if parseError("return "+chunk) == nil {
		return nil
	}
	return ScriptSyntax(chunk, name)
}

// ScriptSyntax reports src's syntax error as Lua words it (nil when it
// compiles). Like lua, it reads past a UTF-8 byte-order mark and a first
// line that starts with # (#!/usr/bin/env ...).
func ScriptSyntax(src, name string) error {
	src = string(scriptText([]byte(src))) // as Run loads it
	err := parseError(src)
	if err == nil {
		return nil
	}
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return &ScriptError{Msg: fmt.Sprintf("%s: %v", name, err)}
	}
	return &ScriptError{Msg: syntaxMessage(pe, src, name)}
}

// parseError parses src, turning a panic of the parser into an error.
func parseError(src string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	_, err = parse.Parse(strings.NewReader(src), "=stdin")
	return err
}

// expandEquals turns Lua 5.1's interactive "=expr" into "return expr".
func expandEquals(chunk string) string {
	if rest, ok := strings.CutPrefix(chunk, "="); ok {
		return "return " + rest
	}
	return chunk
}

// syntaxError words a chunk's syntax error as Lua does: position, what
// is wrong, and the token it is near ("<eof>" at the end of the chunk).
func syntaxError(err error, chunk, name string) error {
	var ae *lua.ApiError
	if !errors.As(err, &ae) {
		return scriptError(err)
	}
	pe, ok := ae.Cause.(*parse.Error)
	if !ok {
		return scriptError(err)
	}
	return &ScriptError{Msg: syntaxMessage(pe, chunk, name)}
}

func syntaxMessage(pe *parse.Error, chunk, name string) string {
	line, near := pe.Pos.Line, pe.Token
	if line == parse.EOF {
		line, near = strings.Count(chunk, "\n")+1, "<eof>"
	} else if near != "" {
		near = "'" + near + "'"
	}
	msg := fmt.Sprintf("%s:%d: %s", name, line, pe.Message)
	if near != "" {
		msg += " near " + near
	}
	return msg
}

// causeOf replaces "context canceled" in a chunk's error by the cause the
// chunk's context was cancelled with (e.g. "interrupted").
func causeOf(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		return err
	}
	var se *ScriptError
	if errors.As(err, &se) {
		msg := strings.ReplaceAll(se.Msg, context.Canceled.Error(), cause.Error())
		return &ScriptError{Msg: msg, Trace: se.Trace}
	}
	return err
}

// formatValue is how the REPL shows a value: strings as they are, tables
// by their contents (see prettyTable), anything else as tostring(v),
// protected against a failing __tostring.
func (s *State) formatValue(v lua.LValue) string {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case *lua.LNilType:
		return "nil"
	case lua.LBool, lua.LNumber:
		return x.String()
	case *lua.LTable:
		if !s.hasToString(x) {
			p := &pretty{s: s, ancestors: map[*lua.LTable]bool{}}
			p.table(x, 1)
			return p.b.String()
		}
	}
	return s.tostring(v)
}

func (s *State) hasToString(v lua.LValue) bool {
	return s.L.GetMetaField(v, "__tostring") != lua.LNil
}

// tostring is Lua's tostring(v), protected.
func (s *State) tostring(v lua.LValue) string {
	L := s.L
	tostr, ok := L.GetGlobal("tostring").(*lua.LFunction)
	if !ok {
		return v.String()
	}
	if err := L.CallByParam(lua.P{Fn: tostr, NRet: 1, Protect: true}, v); err != nil {
		return v.String() + " (__tostring failed: " + scriptError(err).Error() + ")"
	}
	out := L.Get(-1)
	L.Pop(1)
	return lua.LVAsString(out)
}

// The limits of a table shown by the REPL.
const (
	prettyDepth = 4    // tables deeper than this show as {...}
	prettyItems = 20   // entries shown of one table
	prettyBytes = 2000 // output after which entries are left out
)

// pretty writes a table as a Lua constructor: the list part (1..n) in
// order, then the other keys, numbers before strings before the rest,
// each sorted; nested tables inside, up to prettyDepth; strings quoted; a
// table that contains itself shown as <cycle>; functions and threads as
// <function> and <thread>; other values as tostring shows them.
type pretty struct {
	s         *State
	b         strings.Builder
	ancestors map[*lua.LTable]bool
	full      bool // prettyBytes reached: every open table ends with "..."
}

func (p *pretty) table(t *lua.LTable, depth int) {
	if p.ancestors[t] {
		p.b.WriteString("<cycle>")
		return
	}
	if depth > prettyDepth {
		p.b.WriteString("{...}")
		return
	}
	p.ancestors[t] = true
	defer delete(p.ancestors, t)
	n := 0 // the list part: 1..n, no holes
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	var keys []lua.LValue
	t.ForEach(func(k, _ lua.LValue) {
		if f, ok := k.(lua.LNumber); ok && float64(f) == float64(int(f)) && int(f) >= 1 && int(f) <= n {
			return
		}
		keys = append(keys, k)
	})
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	p.b.WriteByte('{')
	shown := 0
	total := n + len(keys)
	entry := func(key lua.LValue, v lua.LValue) bool {
		if p.full || p.b.Len() > prettyBytes {
			p.full = true
			if shown > 0 {
				p.b.WriteString(", ")
			}
			p.b.WriteString("...")
			return false
		}
		if shown == prettyItems {
			fmt.Fprintf(&p.b, ", ... (%d more)", total-shown)
			return false
		}
		if shown > 0 {
			p.b.WriteString(", ")
		}
		if key != nil {
			p.key(key)
			p.b.WriteString(" = ")
		}
		p.value(v, depth)
		shown++
		return true
	}
	more := true
	for i := 1; i <= n && more; i++ {
		more = entry(nil, t.RawGetInt(i))
	}
	for _, k := range keys {
		if !more {
			break
		}
		more = entry(k, t.RawGet(k))
	}
	p.b.WriteByte('}')
}

func (p *pretty) key(k lua.LValue) {
	if s, ok := k.(lua.LString); ok && isIdent(string(s)) && !isKeyword(string(s)) {
		p.b.WriteString(string(s))
		return
	}
	p.b.WriteByte('[')
	p.value(k, prettyDepth)
	p.b.WriteByte(']')
}

func (p *pretty) value(v lua.LValue, depth int) {
	switch x := v.(type) {
	case lua.LString:
		p.b.WriteString(strconv.Quote(string(x)))
	case *lua.LTable:
		if p.s.hasToString(x) {
			p.b.WriteString(p.s.tostring(x))
		} else {
			p.table(x, depth+1)
		}
	case *lua.LFunction:
		p.b.WriteString("<function>")
	case *lua.LState:
		p.b.WriteString("<thread>")
	default:
		p.b.WriteString(p.s.tostring(v))
	}
}

// keyLess orders keys: numbers, then strings, then booleans, then the
// rest (by their text).
func keyLess(a, b lua.LValue) bool {
	rank := func(v lua.LValue) int {
		switch v.(type) {
		case lua.LNumber:
			return 0
		case lua.LString:
			return 1
		case lua.LBool:
			return 2
		}
		return 3
	}
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra < rb
	}
	if x, ok := a.(lua.LNumber); ok {
		return x < b.(lua.LNumber)
	}
	return a.String() < b.String()
}

func isKeyword(s string) bool {
	for _, k := range strings.Fields(luaKeywords) {
		if s == k {
			return true
		}
	}
	return false
}

// Incomplete reports whether chunk is an unfinished chunk that more lines
// could complete (an unclosed block, string or parenthesis): its only
// syntax error is at the end of the input. A chunk that compiles, or has a
// syntax error before its end, is complete.
func Incomplete(chunk string) bool {
	chunk = expandEquals(chunk)
	if parses("return " + chunk) {
		return false
	}
	// An expression cut after an operator ("1 +") fails at its first
	// token as a statement, at the end only as the expression it is.
	return errorAtEOF(chunk) || errorAtEOF("return "+chunk)
}

func parses(src string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := parse.Parse(strings.NewReader(src), "=stdin")
	return err == nil
}

func errorAtEOF(src string) (eof bool) {
	defer func() {
		if recover() != nil {
			eof = false
		}
	}()
	_, err := parse.Parse(strings.NewReader(src), "=stdin")
	var pe *parse.Error
	if !errors.As(err, &pe) || pe.Pos.Line != parse.EOF {
		return false
	}
	// A short string cannot span lines unless the line ends with a
	// backslash.
	if pe.Message == "unterminated string" {
		return strings.HasSuffix(src, "\\")
	}
	return true
}

// Complete returns the completions of word, the identifier path before
// the cursor ("pri", "string.fo", "w:pu", "lc.win"), as whole words. It
// looks at this state's globals: fields of tables, methods of userdata
// (through a metatable's __index table) and, for a receiver it cannot
// resolve, every method in the registry.
func (s *State) Complete(word string) []string {
	return CompleteIn(s.L, s.Reg, word)
}

// luaKeywords are offered at the top level.
const luaKeywords = "and break do else elseif end false for function if in local nil not or repeat return then true until while"

// CompleteIn completes word against L's globals and the registry reg; see
// State.Complete. It only reads tables (no metamethod runs).
func CompleteIn(L *lua.LState, reg *Registry, word string) []string {
	cut := strings.LastIndexAny(word, ".:")
	var keys []string
	if cut < 0 {
		keys = tableKeys(L.G.Global, false)
		keys = append(keys, strings.Fields(luaKeywords)...)
		for _, n := range reg.Names() {
			if !strings.ContainsAny(n, ".:") {
				keys = append(keys, n)
			}
		}
		return withPrefix("", keys, word)
	}
	base, sep, prefix := word[:cut], word[cut], word[cut+1:]
	methodsOnly := sep == ':'
	v, ok := resolvePath(L, base)
	if ok {
		keys = fieldsOf(L, v, methodsOnly)
	}
	if !ok || len(keys) == 0 {
		keys = registryFields(reg, base, methodsOnly)
	}
	return withPrefix(word[:cut+1], keys, prefix)
}

// resolvePath finds the value of a dotted path of globals ("string",
// "a.b"), reading tables only.
func resolvePath(L *lua.LState, path string) (lua.LValue, bool) {
	if path == "" {
		return nil, false
	}
	var cur lua.LValue = L.G.Global
	for _, part := range strings.Split(path, ".") {
		if !isIdent(part) {
			return nil, false
		}
		t, ok := indexTable(L, cur)
		if !ok {
			return nil, false
		}
		cur = t.RawGetString(part)
		if cur == lua.LNil {
			return nil, false
		}
	}
	return cur, true
}

// indexTable is the table that indexing v reads: v itself, or the
// __index table of its metatable.
func indexTable(L *lua.LState, v lua.LValue) (*lua.LTable, bool) {
	if t, ok := v.(*lua.LTable); ok {
		return t, true
	}
	mt, ok := L.GetMetatable(v).(*lua.LTable)
	if !ok {
		return nil, false
	}
	idx, ok := mt.RawGetString("__index").(*lua.LTable)
	return idx, ok
}

// fieldsOf lists the names reachable by v.name (or v:name when
// methodsOnly): a table's string keys and those of its metatable's __index
// table.
func fieldsOf(L *lua.LState, v lua.LValue, methodsOnly bool) []string {
	var keys []string
	if t, ok := v.(*lua.LTable); ok {
		keys = append(keys, tableKeys(t, methodsOnly)...)
	}
	if mt, ok := L.GetMetatable(v).(*lua.LTable); ok {
		if idx, ok := mt.RawGetString("__index").(*lua.LTable); ok {
			keys = append(keys, tableKeys(idx, methodsOnly)...)
		}
	}
	return keys
}

// registryFields lists what the registry knows after base: the luacoll
// module's functions and fields for "lc" and "luacoll", and every method
// for an unknown receiver.
func registryFields(reg *Registry, base string, methodsOnly bool) []string {
	var keys []string
	for _, e := range reg.Entries() {
		switch {
		case methodsOnly && e.Receiver() != "":
			keys = append(keys, e.Short())
		case !methodsOnly && (base == "lc" || base == "luacoll") && strings.HasPrefix(e.Name, "lc."):
			keys = append(keys, e.Short())
		}
	}
	return keys
}

func tableKeys(t *lua.LTable, functionsOnly bool) []string {
	var keys []string
	t.ForEach(func(k, v lua.LValue) {
		ks, ok := k.(lua.LString)
		if !ok || !isIdent(string(ks)) {
			return
		}
		if functionsOnly {
			if _, isFn := v.(*lua.LFunction); !isFn {
				return
			}
		}
		keys = append(keys, string(ks))
	})
	return keys
}

// withPrefix returns lead+k for every distinct key k that starts with
// prefix, sorted.
func withPrefix(lead string, keys []string, prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) && !seen[k] {
			seen[k] = true
			out = append(out, lead+k)
		}
	}
	sort.Strings(out)
	return out
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}
