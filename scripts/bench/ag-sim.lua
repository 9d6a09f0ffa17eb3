-- The shipped all-gather schedules (lib/allgather.lua: ring, direct,
-- hier) as plans, each verified as an all-gather: for luacoll check, with
-- real ranks at a few or simulated ones at a thousand, where check also
-- estimates each plan's time on the layout.
--   luacoll check -n 4 bench/ag-sim.lua [ring|direct|hier|all] [bytes a rank]
--   luacoll check -n 1024 --layout 128x8 bench/ag-sim.lua ring 1048576
-- The window has one signal, counter and barrier slot: a thousand ranks'
-- inbox rows are what a verification's memory grows with.
local lc = require("luacoll")
local ag = require("allgather")
local which = arg[1] or "all"
local n = tonumber(arg[2] or "1048576")
local algos = which == "all" and { "ring", "direct", "hier" } or { which }
local w = lc.window{ bytes = lc.size * n, signals = 1, counters = 1, barriers = 1 }
local src = lc.buffer(n)
for _, algo in ipairs(algos) do
  assert(ag[algo], "no schedule " .. algo .. " (ring, direct, hier or all)")
  local p = lc.plan(ag[algo], w, src, 0, n)
  local rep = p:verify{ collective = "allgather", n = n, src = src }
  if lc.rank == 0 then
    print(("%s: %d ops on rank 0, %s"):format(algo, p:info().ops, rep.summary))
  end
  p:free()
end
