-- Signal ping-pong between ranks 0 and 1: one-way latency = round trip / 2.
--   luacoll run -n 2 bench/pingpong.lua [iterations]
local lc = require("luacoll")
local iters = tonumber(arg[1] or "20000")
assert(lc.size >= 2, "pingpong needs at least 2 ranks")
local w = lc.window{ bytes = 64 }
local src = lc.buffer(8)
local me = lc.rank
local samples = {}
local batch = 100
w:barrier(); w:sync()
if me <= 1 then
  local peer = 1 - me
  local i = 0
  while i < iters do
    local t0 = lc.now()
    for _ = 1, batch do
      i = i + 1
      if me == 0 then
        w:put_signal(peer, 0, src, 0, 8, 0)
        w:wait_signal_from(peer, 0, ">=", i)
      else
        w:wait_signal_from(peer, 0, ">=", i)
        w:put_signal(peer, 0, src, 0, 8, 0)
      end
      w:sync()
    end
    samples[#samples + 1] = (lc.now() - t0) / batch
  end
end
w:barrier(); w:sync()
if me == 0 then
  table.sort(samples)
  local med = samples[math.floor((#samples + 1) / 2)]
  lc.log("pingpong %d iterations: round trip median %.2f us, one-way %.2f us (min %.2f us)",
    iters, med * 1e6, med * 1e6 / 2, samples[1] * 1e6 / 2)
end
w:free()
