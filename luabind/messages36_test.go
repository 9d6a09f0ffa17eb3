package luabind

import (
	"strings"
	"testing"
)

// TestPlanMessages: a coroutine made inside a plan body resumes after the
// plan is made; p:run's times of the wrong type names the type (and the
// string's quotes).
func TestPlanMessages(t *testing.T) {
	code := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local co
local p = lc.plan(function(w)
  co = coroutine.create(function(x) coroutine.yield(x + 1); return "done" end)
  w:signal(lc.rank, 0)
end, w)
local ok, v = coroutine.resume(co, 41)
assert(ok and v == 42, tostring(v))
ok, v = coroutine.resume(co)
assert(ok and v == "done", tostring(v))
for _, c in ipairs{ { "3", 'got string "3"' }, { true, "got boolean" }, { {}, "got table" }, { 1.5, "got 1.5" } } do
  local ok, err = pcall(function() p:run{ times = c[1] } end)
  assert(not ok and err:find("bad argument 'times' (a non-negative integer up to 2^53 expected, " .. c[2] .. ")", 1, true), err)
end
print("messages ok")
`
	res := runLua(t, 2, code)
	mustAllOK(t, res)
	for r, x := range res {
		if !strings.Contains(x.out, "messages ok") {
			t.Fatalf("rank %d:\n%s", r, x.out)
		}
	}
}
