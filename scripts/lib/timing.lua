-- Timing a plan's replays, every rank together.
--
--   local timing = require("timing")
--   timing.once(w, p, times [, calls])            -- seconds a replay took in one timing of times replays
--   timing.median(w, p, times, rounds [, calls])  -- the median of rounds such timings, after 3 replays
--
-- Every rank calls them at once: a barrier lines the ranks up before each
-- timing, w:sync() ends it (the replays done), and every rank gets rank 0's
-- time. A timing is one p:run{times = times}, or with calls, times calls of
-- p:run{} (what a call of one replay costs beside its replay).
local lc = require("luacoll")

local M = {}

function M.once(w, p, times, calls)
  lc.barrier()
  local t = lc.timer()
  t:start()
  if calls then
    for _ = 1, times do p:run() end
  else
    p:run{ times = times }
  end
  t:stop()
  w:sync()
  return lc.allgather(t:seconds())[1] / times
end

function M.median(w, p, times, rounds, calls)
  p:run{ times = 3 }
  w:sync()
  local got = {}
  for k = 1, rounds do
    got[k] = M.once(w, p, times, calls)
  end
  table.sort(got)
  return got[math.floor((rounds + 1) / 2)]
end

return M
