package luabind

import (
	"bytes"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua habits gopher-lua does not keep: tonumber("1e3") (an exponent
// without a decimal point) gives nil there, and a script's "#!" first line
// or UTF-8 byte-order mark is a syntax error. luacoll follows lua.

// installToNumber replaces tonumber with one that reads decimal numbers
// as lua does (exponents with or without a point, hex integers, spaces
// around); with a base it is gopher-lua's.
func installToNumber(L *lua.LState) {
	orig := L.GetGlobal("tonumber")
	L.SetGlobal("tonumber", L.NewFunction(func(L *lua.LState) int {
		s, isStr := L.Get(1).(lua.LString)
		if n := L.GetTop(); n >= 2 || !isStr {
			L.Push(orig)
			for i := 1; i <= n; i++ {
				L.Push(L.Get(i))
			}
			L.Call(n, 1)
			return 1
		}
		if v, ok := parseLuaNumber(string(s)); ok {
			L.Push(lua.LNumber(v))
		} else {
			L.Push(lua.LNil)
		}
		return 1
	}))
}

// parseLuaNumber reads s as lua's tonumber does without a base: a decimal
// number (sign, digits, point, exponent) or a hex integer, with spaces
// around; not inf, nan, underscores or hex floats.
func parseLuaNumber(s string) (float64, bool) {
	s = strings.Trim(s, " \t\n\r\f\v")
	body := s
	neg := false
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg, body = body[0] == '-', body[1:]
	}
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		v, err := strconv.ParseUint(body[2:], 16, 64)
		if err != nil {
			return 0, false
		}
		if neg {
			return -float64(v), true
		}
		return float64(v), true
	}
	if body == "" || strings.IndexFunc(body, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == 'e' || r == 'E' || r == '+' || r == '-')
	}) >= 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return v, true // ±inf or 0, as strtod gives
		}
		return 0, false
	}
	return v, true
}

// scriptText is src as lua loads a script file: a UTF-8 byte-order mark
// is dropped, and a first line starting with '#' (#!/usr/bin/env ...) is
// blanked, its newline kept so that line numbers stay right.
func scriptText(src []byte) []byte {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if len(src) > 0 && src[0] == '#' {
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			return src[i:]
		}
		return nil
	}
	return src
}
