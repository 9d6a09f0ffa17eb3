package luabind

import (
	"strings"
	"testing"
)

// TestCallsRefuseWhatTheyDoNotTake: fixed-width reads blame their only
// argument, and arguments beyond what a call takes are refused naming
// the call (nils at the end are no arguments).
func TestCallsRefuseWhatTheyDoNotTake(t *testing.T) {
	res := runLua(t, 1, `
local lc = require("luacoll")
local b = lc.buffer(4096)
local function err(f, ...) local ok, e = pcall(f, ...); assert(not ok, "no error"); return e end
print("A " .. err(b.get_u32, b, 4093))
print("B " .. err(b.set_u64, b, 4090, 1))
print("C " .. err(b.get_u32, b, 0, 1))
print("D " .. err(lc.now, 1))
print("E " .. err(lc.window, {bytes = 64}, 2))
local w = lc.window{bytes = 64}
print("F " .. err(w.put, w, 0, 0, b, 0, 8, 9))
assert(b:checksum(0, nil) == b:checksum())
lc.log("%d %s", 1, "log takes any number")
w:free()`)
	mustAllOK(t, res)
	out := res[0].out
	for _, want := range []string{
		"A rank 0: b:get_u32: bad argument 'off' (4 bytes at offset 4093 run past the end",
		"B rank 0: b:set_u64: bad argument 'off' (8 bytes at offset 4090 run past the end",
		"C rank 0: b:get_u32: takes 1 argument, b:get_u32(off), got 2",
		"D rank 0: lc.now: takes no arguments, got 1",
		"E rank 0: lc.window: takes 1 argument, lc.window{bytes",
		"F rank 0: w:put: takes 5 arguments, w:put(peer, dst_off, src, src_off, n), got 6",
		"1 log takes any number",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestErrorValuesAreShown: error() with a table says where, which rank,
// and what the table holds (or its __tostring); a syntax error is one
// line in lua's words.
func TestErrorValuesAreShown(t *testing.T) {
	for code, want := range map[string]string{
		"local t = {code = 42, msg = 'bad', list = {1, 2}}\nerror(t)":            "test.lua:2: rank 0: error object {code = 42, list = {1, 2}, msg = \"bad\"}",
		"error(setmetatable({}, {__tostring = function() return 'custom' end}))": "test.lua:1: rank 0: error object custom",
		"local t = {}; t.self = t; t[1] = 'x'; error(t)":                         "rank 0: error object {\"x\", self = <cycle>}",
		"local function f() error({code = 1}) end\nf()":                          "test.lua:1: rank 0: error object {code = 1}",
		"print(\n": "rank 0: test.lua:2: syntax error near <eof>",
		"x = = 1":  "rank 0: test.lua:1: syntax error near '='",
	} {
		res := runLua(t, 1, code)
		if res[0].err == nil || res[0].err.Error() != want && !strings.HasSuffix(res[0].err.Error(), want) {
			t.Errorf("%q: got %v, want %q", code, res[0].err, want)
		}
		if res[0].err != nil && strings.ContainsAny(res[0].err.Error(), "\n") {
			t.Errorf("%q: the error spans lines: %q", code, res[0].err)
		}
	}
}
