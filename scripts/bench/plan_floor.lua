-- plan_floor.lua: where a small plan call's time goes on CUDA: an all-reduce
-- (one_shot) of bytes bytes (default 1 KiB) recorded as two plans, timed as the same plan each call, the two in
-- turn (as bench --plan runs them), 1,000 replays in one launch, and the host's
-- own time a call (100 calls enqueued, before the sync); the same for an
-- all-gather (direct). Medians are not taken: the best of 3 timings.
-- algo (default one_shot) names another all_reduce schedule.
--   luacoll run -n N --device cuda bench/plan_floor.lua [mode] [calls] [bytes] [algo]
local lc = require("luacoll")
local ar = require("all_reduce")
local ag = require("allgather")
local modes = { arg[1] or "device" }
local R = tonumber(arg[2] or "2000")
local n, size = tonumber(arg[3] or "1024"), lc.size
local algo = arg[4] or "one_shot"
local w = lc.window{ bytes = 4194304 }
local o = { type = "f32", scratch = math.max(1048576, n) }
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
  local p1 = lc.plan(ar[algo], w, n, o, { mode = mode })
  local p2 = lc.plan(ar[algo], w, n, o, { mode = mode })
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
    local info = p1:info()
    print(("ranks=%d mode=%s: allreduce %s %dB (blocks %s, grids %s, threads %s): same plan %.2f us, two in turn %.2f us, batched %.2f us, host's own %.2f us a call | allgather direct %dB: call %.2f us, batched %.2f us"):format(
      size, mode, algo, n, tostring(info.blocks or 1), tostring(info.grids or 0), tostring(info.threads), one, turn, batch, issue, n, gone, gbatch))
  end
  p1:free(); p2:free(); g:free()
end
