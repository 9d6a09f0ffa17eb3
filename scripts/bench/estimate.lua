-- The shipped all-gather schedules (lib/allgather.lua ring, direct, hier)
-- as plans: each one's time per replay measured on the stream (lib timing,
-- back to back after warm-up replays, the median of rounds such timings)
-- beside p:estimate's prediction of a replay in such a loop (steady).
--   luacoll run -n 2 bench/estimate.lua [model.json|-] [sizes, comma-separated bytes a rank] [replays] [rounds]
-- "-" (the default) is the model shipped for the backend. Rank 0 prints a
-- line per schedule and size: measured and predicted microseconds, their
-- ratio (predicted / measured), and the critical path's share of link time.
local lc = require("luacoll")
local ag = require("allgather")
local timing = require("timing")
local model = arg[1] ~= "-" and arg[1] or nil
local sizes = {}
for s in (arg[2] or "1024,16384,262144,4194304"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(s) end
local replays = tonumber(arg[3] or "30")
local rounds = tonumber(arg[4] or "3")
local most = 0
for _, n in ipairs(sizes) do most = math.max(most, n) end
local w = lc.window{ bytes = most * lc.size }
local src = lc.buffer(most)
src:fill("rand", lc.rank)
if lc.rank == 0 then
  print(("# %-6s %10s %12s %12s %7s %6s  (%d ranks, median of %d x %d replays)"):format("algo", "n", "measured(us)", "predicted(us)", "p/m", "link", lc.size, rounds, replays))
end
for _, algo in ipairs{ "ring", "direct", "hier" } do
  for _, n in ipairs(sizes) do
    local p = lc.plan(ag[algo], w, src, 0, n)
    local rep = p:verify{ collective = "allgather", n = n, src = src }
    assert(rep.ok, rep.summary)
    local e = p:estimate{ model = model }
    local measured = timing.median(w, p, replays, rounds)
    if lc.rank == 0 then
      print(("  %-6s %10d %12.2f %12.2f %7.2f %5.0f%%"):format(algo, n, measured * 1e6, e.steady * 1e6, e.steady / measured, 100 * e.link / e.time))
    end
    p:free()
  end
end
