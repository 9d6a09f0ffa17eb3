-- plan_floor.lua: where a small plan call's time goes on CUDA: a 1 KiB all-reduce
-- (one_shot) recorded as two plans, timed as the same plan each call, the two in
-- turn (as bench --plan runs them), 1,000 replays in one launch, and the host's
-- own time a call (100 calls enqueued, before the sync); the same for an
-- all-gather (direct). Medians are not taken: the best of 3 timings.
--   luacoll run -n N --device cuda bench/plan_floor.lua [mode] [calls]
local lc = require("luacoll")
local ar = require("all_reduce")
local ag = require("allgather")
local modes = { arg[1] or "device" }
local R = tonumber(arg[2] or "2000")
local n, size = 1024, lc.size
local w = lc.window{ bytes = 4194304 }
local o = { type = "f32", scratch = 1048576 }
local function timeit(f)
  local best = 1e9
  for k = 1, 3 do
    lc.barrier()
    local t = lc.timer()
    t:start()
    f()
    w:sync()
    t:stop()
    best = math.min(best, t:seconds() / R)
  end
  return best * 1e6
end
for _, mode in ipairs(modes) do
  local p1 = lc.plan(ar.one_shot, w, n, o, { mode = mode })
  local p2 = lc.plan(ar.one_shot, w, n, o, { mode = mode })
  p1:run(); p2:run(); w:sync()
  local one = timeit(function() for i = 1, R / 2 do p1:run(); p1:run() end end)
  -- one_shot alternates halves: p1 twice in a row is what p1,p1 would record? (timing only)
  local turn = timeit(function() for i = 1, R / 2 do p1:run(); p2:run() end end)
  local batch = timeit(function() p1:run{ times = R / 2 }; p2:run{ times = R / 2 } end)
  -- The host's own time a call: 100 calls enqueued, timed before the sync.
  local issue = 1e9
  for k = 1, 3 do
    lc.barrier()
    local t = lc.timer()
    t:start()
    for i = 1, 50 do p1:run(); p2:run() end
    t:stop()
    w:sync()
    issue = math.min(issue, t:seconds() / 100 * 1e6)
  end
  local src = lc.buffer(n)
  local g = lc.plan(ag.direct, w, src, 0, n, { mode = mode })
  g:run(); w:sync()
  local gone = timeit(function() for i = 1, R do g:run() end end)
  local gbatch = timeit(function() g:run{ times = R } end)
  if lc.rank == 0 then
    print(("ranks=%d mode=%s: allreduce one_shot 1KiB: same plan %.2f us, two in turn %.2f us, batched %.2f us, host's own %.2f us a call | allgather direct 1KiB: call %.2f us, batched %.2f us"):format(
      size, mode, one, turn, batch, issue, gone, gbatch))
  end
  p1:free(); p2:free(); g:free()
end
