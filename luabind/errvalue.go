package luabind

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// An error raised with a value that is not a string (error({code = 42}))
// has no message of its own: luacoll shows where it was raised, the rank,
// and the value as the REPL shows values (a table's contents, or its
// __tostring).

// valueError is the message of an error whose object is not a string,
// or "" when it is one (or a number, which Lua turns into one).
func (s *State) valueError(ae *lua.ApiError) string {
	switch ae.Object.(type) {
	case lua.LString, lua.LNumber:
		return ""
	}
	pos := raisedAt(ae.StackTrace)
	if pos != "" {
		pos += " "
	}
	return fmt.Sprintf("%srank %d: error object %s", pos, s.rank(), s.formatValue(ae.Object))
}

// raisedAt is the first Lua position ("s.lua:2:") of a stack traceback.
func raisedAt(trace string) string {
	for _, l := range strings.Split(trace, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "[G]") || strings.HasPrefix(l, "stack traceback") {
			continue
		}
		if i := strings.Index(l, ": in "); i > 0 {
			return l[:i+1]
		}
	}
	return ""
}
