package luabind

import (
	"strings"
	"testing"
)

// TestRandomSeedGivesOneSequence: math.randomseed(42) gives the same
// draws on every rank and in every run; seeded with lc.rank the ranks'
// draws differ; draws stay in their interval, and an empty interval is
// an error, not a crash.
func TestRandomSeedGivesOneSequence(t *testing.T) {
	code := `
local lc = require("luacoll")
math.randomseed(42)
local a = {}
for i = 1, 8 do a[i] = math.random(1, 1e6) end
print("SEEDED " .. table.concat(a, ","))
math.randomseed(42.0)
assert(math.random(1, 1e6) == a[1], "42.0 seeds as 42")
math.randomseed(lc.rank)
local b = {}
for i = 1, 8 do b[i] = math.random(1e6) end
print("RANK " .. table.concat(b, ","))
for i = 1, 1000 do
  local x, y, z = math.random(), math.random(3), math.random(-2, 2)
  assert(x >= 0 and x < 1 and y >= 1 and y <= 3 and z >= -2 and z <= 2 and z == math.floor(z), "range")
end
assert(math.random(5, 5) == 5)
for _, f in ipairs{ function() return math.random(0) end, function() return math.random(3, 1) end } do
  local ok, err = pcall(f)
  assert(not ok and err:find("interval is empty", 1, true), err)
end
local ok, err = pcall(math.random, 1.5)
assert(not ok and err:find("no integer representation", 1, true), err)
`
	line := func(out, prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, prefix); i >= 0 {
				return l[i+len(prefix):]
			}
		}
		t.Fatalf("no %q in:\n%s", prefix, out)
		return ""
	}
	var seeded []string
	for run := 0; run < 2; run++ {
		res := runLua(t, 2, code)
		mustAllOK(t, res)
		for _, x := range res {
			seeded = append(seeded, line(x.out, "SEEDED "))
		}
		if a, b := line(res[0].out, "RANK "), line(res[1].out, "RANK "); a == b {
			t.Errorf("run %d: ranks seeded with lc.rank drew the same: %s", run, a)
		}
	}
	for i, s := range seeded {
		if s != seeded[0] {
			t.Fatalf("draw %d after math.randomseed(42): %s, want %s (as the first)", i, s, seeded[0])
		}
	}
}
