-- A plan's wait that nobody satisfies fails at the window's timeout with
-- an error naming the op, its script line and the mode; every rank gets
-- its error, and the window and later plans still work.
--   luacoll run -n 2 [--device cuda] tests/plan_fail.lua [mode]
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local mode = arg[1] or "auto"
local w = lc.window{ bytes = 64 * size, timeout_ms = 300 }
local src = lc.buffer(64)
src:fill("const", me + 1)
local p = lc.plan(function()
  w:put_signal((me + 1) % size, me * 64, src, 0, 64, 0, 1, "add")
  w:wait_signal_from((me + size - 1) % size, 0, ">=", 1)
  w:wait_signal_from((me + size - 1) % size, 1, ">=", 1) -- NOBODY
end, { mode = mode })
local line = 14
p:run()
local ok, err = pcall(lc.sync)
assert(not ok, "the plan's unsatisfied wait did not fail")
err = tostring(err)
assert(err:find("wait_signal_from(peer " .. (me + size - 1) % size .. ", sig 1) >= 1", 1, true), err)
assert(err:find("plan_fail.lua:" .. line, 1, true), err)
assert(err:find("timed out", 1, true), err)
local m = p:info().mode
-- In stream mode the interpreter runs the waits where it can (launches).
if m == "device" or m == "graph" or p:info().launches then
  assert(err:find("(plan op 3, " .. m .. " mode, recorded at", 1, true), err)
end
-- The data of the first op arrived all the same.
local left = (me + size - 1) % size
assert(w:buffer():get_u32(left * 64) == 0x01010101 * (left + 1), "the put before the failed wait did not land")
p:free()
lc.barrier()
-- A good plan on the same window runs after the failure.
local q = lc.plan(function() w:barrier(0) end, { mode = mode })
q:run{ times = 10 }
lc.sync()
q:free()
lc.log("plan_fail: mode %s: %s", mode, err:sub(1, 300))
w:free()
lc.barrier()
if me == 0 then print("plan_fail: 1 passed, 0 failed") end
