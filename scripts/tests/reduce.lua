-- The reduction schedules of lib/reduce_scatter.lua and lib/all_reduce.lua,
-- on any backend:
--   luacoll run -n 4 tests/reduce.lua                    (host)
--   luacoll run -n 2 --device cuda tests/reduce.lua [mode] (mode: lc.plan's, "auto" by default)
-- Every schedule, called from Lua and as two plans run in turn, on integer
-- data with exact results (uneven and empty chunks included); each result
-- is compared with a reference built by w:reduce from every rank's input.
-- Then plans of the schedules that reduce in rank order (one_shot: w:reduce,
-- one_shot_pull: reduce_from) on f32, f64, f16 and bf16 data, whose results
-- have the reference's bits.
local lc = require("luacoll")
local rs, ar = require("reduce_scatter"), require("all_reduce")
local mode = arg and arg[1] or "auto"
local n, size, me = 4000, lc.size, lc.rank
-- Each schedule gets a scratch area of its own: calls run back to back,
-- and a peer's next call may write its scratch while this rank still
-- reads the last one's.
local half = size * size * n
local region = 2 * half + size * n
local areas = 30
local w = lc.window{ bytes = size * n + areas * region }
local used = 0
local function area()
  used = used + 1
  assert(used <= areas)
  return size * n + (used - 1) * region
end

-- inputs[r] is rank r's input (iota from r * 1000, as 32-bit words).
local inputs = {}
for r = 0, size - 1 do
  inputs[r] = lc.buffer(size * n)
  inputs[r]:fill("iota", r * 1000)
end
local function reference(t, op, ins)
  ins = ins or inputs
  local ref = lc.buffer(size * n)
  ref:write(0, ins[0]:read(0, size * n))
  for r = 1, size - 1 do
    w:reduce(ref, 0, ins[r], 0, size * n, t, op)
  end
  lc.sync()
  return ref
end
local refs = { sum = reference("i32", "sum"), max = reference("u32", "max") }

local function load(m, ins) w:put(me, 0, (ins or inputs)[me], 0, m) end
local function check(what, off, m, ref)
  lc.sync()
  if not w:buffer():equal(ref or refs.sum, off, off, m) then
    error(("rank %d: %s: %d bytes at %d differ from the reference"):format(me, what, m, off))
  end
end

local passed = 0
-- Eager calls.
for _, alg in ipairs({ "ring", "direct", "push", "auto" }) do
  local o = { type = "u32", scratch = area(), half = half }
  for _ = 1, 3 do
    load(size * n)
    rs[alg](w, n, o)
    check("reduce_scatter." .. alg, me * n, n)
  end
  passed = passed + 1
end
for _, alg in ipairs({ "ring", "one_shot", "two_shot", "one_shot_pull", "two_shot_pull", "auto" }) do
  local o = { type = "i32", scratch = area(), half = half }
  for _, m in ipairs({ n * size, 4 * 37, 4 }) do
    for _ = 1, 2 do
      load(m)
      ar[alg](w, m, o)
      check("all_reduce." .. alg .. " of " .. m .. " bytes", 0, m)
    end
  end
  passed = passed + 1
end
do
  local o = { type = "u32", op = "max", scratch = area() }
  load(n)
  ar.ring(w, n, o)
  check("all_reduce.ring max", 0, n, refs.max)
  passed = passed + 1
end

-- Plans: two of each (two calls: the staged schedules alternate between
-- two staging halves), run in turn.
local plans, byname = {}, {}
for _, alg in ipairs({ "ring", "direct", "push", "auto" }) do
  local o = { type = "u32", scratch = area(), half = half }
  plans[#plans + 1] = { "reduce_scatter." .. alg, { lc.plan(rs[alg], w, n, o, { mode = mode }), lc.plan(rs[alg], w, n, o, { mode = mode }) }, true }
end
for _, alg in ipairs({ "ring", "one_shot", "two_shot", "one_shot_pull", "two_shot_pull", "auto" }) do
  local o = { type = "i32", scratch = area(), half = half }
  plans[#plans + 1] = { "all_reduce." .. alg, { lc.plan(ar[alg], w, n * size, o, { mode = mode }), lc.plan(ar[alg], w, n * size, o, { mode = mode }) }, false }
end
local kinds = {}
for _, e in ipairs({ plans[1], plans[2], plans[3] }) do
  for _, op in ipairs(e[2][1]:ops()) do kinds[op.op] = (kinds[op.op] or 0) + 1 end
end
assert(kinds.reduce == 2 * (size - 1) and kinds.reduce_from == size - 1,
  ("the reduce-scatter plans hold %s reduce and %s reduce_from ops"):format(tostring(kinds.reduce), tostring(kinds.reduce_from)))
-- auto records the schedule its rule names for the size and the peers.
for _, e in ipairs(plans) do byname[e[1]] = e[2][1] end
local function kinds_of(p)
  local k = {}
  for _, op in ipairs(p:ops()) do k[#k + 1] = op.op end
  return table.concat(k, " ")
end
local shm, mapped = rs.shared_all(w), rs.mapped_all(w)
local want = {
  ["reduce_scatter"] = size * n <= (shm and 8192 or 262144) and "push" or (mapped and "direct" or "ring"),
  ["all_reduce"] = n * size <= (shm and 4096 or 65536) and "one_shot" or (not shm and n * size <= 262144 and "two_shot")
    or (mapped and "two_shot_pull" or "ring"),
}
for coll, alg in pairs(want) do
  local got, exp = kinds_of(byname[coll .. ".auto"]), kinds_of(byname[coll .. "." .. alg])
  if got ~= exp then
    error(("rank %d: %s.auto of these sizes should be %s: recorded %s, want %s"):format(me, coll, alg, got, exp))
  end
end
for rep = 1, 6 do
  for _, e in ipairs(plans) do
    local name, p, scatter = e[1], e[2][rep % 2 + 1], e[3]
    load(size * n)
    p:run()
    if scatter then
      check(name .. " (plan, mode " .. p:info().mode .. ")", me * n, n)
    else
      check(name .. " (plan, mode " .. p:info().mode .. ")", 0, size * n)
    end
  end
end
passed = passed + #plans

-- floats[r] is rank r's input for the float types: bytes 0x3c + r plus the
-- iota as 32-bit words, finite values of varied mantissas for f32, f64,
-- f16 and bf16 alike.
local floats = {}
for r = 0, size - 1 do
  floats[r] = lc.buffer(size * n)
  floats[r]:fill("const", 0x3c + r)
  w:reduce(floats[r], 0, inputs[r], 0, size * n, "u32", "sum")
end
lc.sync()
local fplans = {}
for _, t in ipairs({ "f32", "f64", "f16", "bf16" }) do
  local ref = reference(t, "sum", floats)
  for _, alg in ipairs({ "one_shot", "one_shot_pull" }) do
    local o = { type = t, scratch = area(), half = half }
    fplans[#fplans + 1] = { ("all_reduce.%s %s"):format(alg, t),
      { lc.plan(ar[alg], w, n * size, o, { mode = mode }), lc.plan(ar[alg], w, n * size, o, { mode = mode }) }, ref }
  end
end
for rep = 1, 4 do
  for _, e in ipairs(fplans) do
    local name, p, ref = e[1], e[2][rep % 2 + 1], e[3]
    load(size * n, floats)
    p:run()
    check(name .. " (plan, mode " .. p:info().mode .. ")", 0, size * n, ref)
  end
end
passed = passed + #fplans
if me == 0 then print(("reduce: %d passed, 0 failed"):format(passed)) end
