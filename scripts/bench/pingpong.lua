-- Signal ping-pong between ranks 0 and 1: one-way latency = round trip / 2.
--   luacoll run -n 2 bench/pingpong.lua [iterations]
-- Each round trip (put_signal, wait, sync on both sides) is timed on its
-- own; rank 0 reports the median and the mean over all of them.
local lc = require("luacoll")
local iters = tonumber(arg[1] or "20000")
assert(lc.size >= 2, "pingpong needs at least 2 ranks")
local w = lc.window{ bytes = 64 }
local src = lc.buffer(8)
local me = lc.rank
local samples = {}
w:barrier(); w:sync()
if me <= 1 then
  local peer = 1 - me
  local now = lc.now
  for i = 1, iters do
    local t0 = now()
    if me == 0 then
      w:put_signal(peer, 0, src, 0, 8, 0)
      w:wait_signal_from(peer, 0, ">=", i)
    else
      w:wait_signal_from(peer, 0, ">=", i)
      w:put_signal(peer, 0, src, 0, 8, 0)
    end
    w:sync()
    samples[i] = now() - t0
  end
end
w:barrier(); w:sync()
if me == 0 then
  local sum = 0
  for i = 1, #samples do sum = sum + samples[i] end
  table.sort(samples)
  local med = samples[math.floor((#samples + 1) / 2)]
  lc.log("pingpong %d iterations: round trip median %.2f us, mean %.2f us, min %.2f us; one-way (median / 2) %.2f us",
    iters, med * 1e6, sum / #samples * 1e6, samples[1] * 1e6, med * 1e6 / 2)
end
if me <= 1 then lc.log("ran on CPUs %s", lc.info().cpus) end
w:free()
