-- p:run{times = 1e9} stops at its first failed wait: rank 0 asks for a
-- billion replays, the others for one, so rank 0's second replay waits
-- for a signal that never comes; its run ends with that wait's error
-- within a few timeouts instead of enqueueing the rest.
--   luacoll run -n 2 [--device cuda] tests/plan_stop.lua [mode]
-- (Ctrl-C during a healthy billion replays: see the replays loop at the
-- end, run with "forever" as the second argument.)
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local mode, forever = arg[1] or "auto", arg[2] == "forever"
local w = lc.window{ bytes = 64 * size, timeout_ms = forever and 10000 or 1000 }
local src = lc.buffer(8)
local p = lc.plan(function()
  w:put_signal((me + 1) % size, 0, src, 0, 8, 0)
  w:wait_signal(0, ">=", 1) -- WAIT
end, { mode = mode })
if forever then
  lc.log("replaying until interrupted (mode %s)", p:info().mode)
  p:run{ times = 1e9 }
  lc.sync()
  return
end
local t0 = lc.now()
local ok, err = pcall(function() p:run{ times = me == 0 and 1e9 or 1 }; lc.sync() end)
local took = lc.now() - t0
if me == 0 then
  assert(not ok, "a billion replays with a wait nobody satisfies succeeded")
  err = tostring(err)
  assert(err:find("timed out", 1, true) and err:find("plan_stop.lua:15", 1, true), err)
  assert(took < 10, ("the run took %.1f s to stop"):format(took))
else
  assert(ok, tostring(err))
end
lc.log("plan_stop: mode %s: stopped after %.2f s: %s", p:info().mode, took, tostring(err):sub(1, 200))
p:free()
w:free()
lc.barrier()
if me == 0 then print("plan_stop: 1 passed, 0 failed") end
