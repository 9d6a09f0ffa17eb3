-- What luacoll calibrate measures, as plans replayed in each mode (the
-- costs p:estimate predicts with are those of replays): between ranks 0
-- and 1, an 8-byte put_signal -> wait ping-pong (one-way hop), puts of
-- each size from both ranks at once (as in a collective) and to the rank
-- itself, each then flushed, and the window barrier over every rank.
--   luacoll run -n 2 bench/calibrate.lua [modes] [sizes] [replays]
-- modes and sizes are comma-separated; returns the times in nanoseconds
-- as lines "mode what bytes ns" (what: hop, put, self, barrier).
local lc = require("luacoll")
local modes, sizes = {}, {}
for m in (arg[1] or "host"):gmatch("[%a]+") do modes[#modes + 1] = m end
for s in (arg[2] or "4096,65536,1048576,16777216"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(s) end
local replays = tonumber(arg[3] or "20")
assert(lc.size >= 2, "calibrate needs 2 ranks or more")
local most = 8
for _, n in ipairs(sizes) do most = math.max(most, n) end
local w = lc.window{ bytes = 2 * most, signals = 2 }
local src = lc.buffer(most)
-- Real data: pages never written read as the zero page, from the cache.
src:fill("rand", lc.rank)
local me, peer = lc.rank, 1 - lc.rank
local out = {}

-- per returns the time of one replay of body's plan, in nanoseconds.
local function per(mode, body, times)
  local p = lc.plan(body, w, src, { mode = mode })
  p:run{ times = 3 }
  w:sync()
  lc.barrier()
  local t = lc.timer()
  t:start()
  p:run{ times = times }
  t:stop()
  w:sync()
  p:free()
  return lc.allgather(t:seconds())[1] / times * 1e9
end

local hops = 50
for _, mode in ipairs(modes) do
  local hop = per(mode, function(w, src)
    if me > 1 then w:flush() return end -- the other ranks look on
    for k = 1, hops do
      if me == 0 then
        w:put_signal(peer, 0, src, 0, 8, 0, 1, "add")
        w:wait_signal_from(peer, 0, ">=", k)
      else
        w:wait_signal_from(peer, 0, ">=", k)
        w:put_signal(peer, 0, src, 0, 8, 0, 1, "add")
      end
    end
  end, replays) / (2 * hops)
  out[#out + 1] = ("%s hop 8 %.3f"):format(mode, hop)
  for _, n in ipairs(sizes) do
    local put = per(mode, function(w, src)
      if me <= 1 then w:put(peer, me * most, src, 0, n) end
      w:flush()
    end, replays)
    local self = per(mode, function(w, src)
      w:put(me, (me % 2) * most, src, 0, n)
      w:flush()
    end, replays)
    out[#out + 1] = ("%s put %d %.3f"):format(mode, n, put)
    out[#out + 1] = ("%s self %d %.3f"):format(mode, n, self)
  end
  local bars = 20
  local bar = per(mode, function(w)
    for _ = 1, bars do w:barrier(0) end
  end, replays) / bars
  out[#out + 1] = ("%s barrier %d %.3f"):format(mode, lc.size, bar)
end
return table.concat(out, "\n")
