package luabind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testCostModel has start and per-byte costs on puts only (signals, waits
// and barriers free), so that a ring's estimate has a closed form.
const testCostModel = `{"machine": "test", "backend": "host", "modes": {"host": {
  "self": {"put": {"alpha_ns": 100, "beta_ns_per_byte": 0.01}, "signal": {}, "wait": {}, "copy": {}, "barrier": {}},
  "shm":  {"put": {"alpha_ns": 1000, "beta_ns_per_byte": 0.1}, "signal": {}, "wait": {}, "copy": {}, "barrier": {}}}}}`

// TestPlanEstimate records scripts/lib's ring on 4 ranks and checks
// p:estimate against the ring's closed form (the own copy, then N-1 steps
// of one put each), its critical path (the ring's put_signals and waits,
// crossing ranks, from the script's lines), and its argument errors.
func TestPlanEstimate(t *testing.T) {
	model := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(model, []byte(testCostModel), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `
local lc = require("luacoll")
local ag = require("allgather")
local model, n = ...
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
local p = lc.plan(ag.ring, w, src, 0, n)
local e = p:estimate{ model = model, cpus = 0 }
local want = (100 + n * 0.01 + (lc.size - 1) * (1000 + n * 0.1)) * 1e-9
assert(math.abs(e.time - want) < 1e-12, ("time %.9g, want %.9g"):format(e.time, want))
assert(math.abs(e.steady - want) < 1e-12, ("steady %.9g, want %.9g (a ring's replays in a loop end alike)"):format(e.steady, want))
assert(e.call == e.steady, ("call %.9g: want steady %.9g (the model has no call cost)"):format(e.call, e.steady))
assert(#e.per_rank == lc.size and e.mode == "host" and e.machine == "test", "fields")
assert(math.abs(e.link + e.start_cost - e.time) < 1e-12, "link + start_cost")
local puts, ranks = 0, {}
for i, s in ipairs(e.path) do
  if i > 1 then assert(math.abs(s.start - e.path[i - 1].finish) < 1e-12, "path not contiguous at " .. i) end
  if s.op_name == "put_signal" then
    puts = puts + 1
    assert(s.class == "shm" and s.file:find("allgather.lua") and s.line > 0, "put_signal step")
  end
  ranks[s.rank] = true
end
assert(puts == lc.size - 1, "put_signals on the path: " .. puts)
local crossed = 0
for _ in pairs(ranks) do crossed = crossed + 1 end
assert(crossed == lc.size, "the path crosses " .. crossed .. " ranks")
local nets = 0
for _, s in ipairs(p:estimate{ model = model, layout = "2x2" }.path) do
  if s.class == "net" then nets = nets + 1 end
end
assert(nets >= 1, "no net step on the path of a 2x2 layout")
-- 4 ranks taking turns on 2 CPUs (the model has no switch cost): each
-- CPU runs its two ranks' ops one after the other.
local two = p:estimate{ model = model, cpus = 2 }
assert(math.abs(two.time - 2 * want) < 1e-12, ("2 CPUs: time %.9g, want %.9g"):format(two.time, 2 * want))
local shipped = p:estimate()
assert(shipped.time > 0 and shipped.machine ~= "", "shipped model")
-- The shipped models by name, as luacoll check --model takes them.
assert(p:estimate{ model = "host" }.time == shipped.time, "model = \"host\"")
for _, c in ipairs{
  { { model = "/nonexistent/model.json" }, "bad argument 'model'" },
  { { model = model, mode = "graph" }, "bad argument 'mode' (the model has no mode \"graph\"" },
  { { modle = model }, "bad argument 'modle' (unknown option" },
  { { model = 7 }, "bad argument 'model' (string expected" },
  { { layout = "3x2" }, "bad argument 'layout' (\"3x2\" places 6 ranks; the plan has 4)" },
  { { layout = "2by2" }, "bad argument 'layout' (\"2by2\": want NODESxRANKS" },
  { { cpus = -1 }, "bad argument 'cpus' (a non-negative integer" },
} do
  local ok, err = pcall(p.estimate, p, c[1])
  assert(not ok and err:find(c[2], 1, true), tostring(err))
end
print("ok", e.time, #e.path)
`
	for r, res := range runLuaArgs(t, 4, code, model, "65536") {
		if res.err != nil {
			t.Fatalf("rank %d: %v", r, res.err)
		}
		if !strings.Contains(res.out, "ok") {
			t.Fatalf("rank %d: %q", r, res.out)
		}
	}
}
