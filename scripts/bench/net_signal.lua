-- What a put of n bytes costs between two ranks across logical nodes,
-- with and without its signal and its flush, as plans replayed 10 at a
-- time (the median of 5 timings, rank 0's clock):
--   luacoll run -n 2 --nodes 2 [--device cuda --gpus 0,1] bench/net_signal.lua [n]
-- put+flush both: each rank puts to the other and flushes; exchange: each
-- put_signals, waits for the other's and flushes (an all-gather's step);
-- one way: rank 0 alone sends (put_signal and flush; put_signal alone;
-- put, signal, flush; put, flush, signal), rank 1 waits for the signal;
-- own copy: each rank's n bytes from its buffer into its own window; step:
-- the own copy, then the exchange (a 2-rank all-gather's plan but for its
-- barrier).
-- (docs/results/cost-model.md, "The network's steps".)
local lc = require("luacoll")
local timing = require("timing")
local n = tonumber(arg[1] or "2097152")
local w = lc.window{ bytes = 4 * n, signals = 2 }
local src = lc.buffer(n)
src:fill("rand", lc.rank)
local me, peer = lc.rank, 1 - lc.rank
local sig = 0
local function timed(p, times)
  return timing.median(w, p, times, 5) * 1e6
end
local put = lc.plan(function(w, src) w:put(peer, me * n, src, 0, n); w:flush() end, w, src)
local first = sig; sig = sig + 1
local ex = lc.plan(function(w, src)
  w:put_signal(peer, me * n, src, 0, n, 0, 1, "add")
  w:wait_signal_from(peer, 0, ">=", first + 1)
  w:flush()
end, w, src)
local first2 = sig; sig = sig + 1
local ex1 = lc.plan(function(w, src)
  if me == 0 then
    w:put_signal(peer, me * n, src, 0, n, 0, 1, "add")
  else
    w:wait_signal_from(peer, 0, ">=", first2 + 1)
  end
  w:flush()
end, w, src)
local function oneway(body)
  local first = sig; sig = sig + 1
  return lc.plan(function(w, src)
    if me == 0 then body(w, src) else w:wait_signal_from(peer, 0, ">=", first + 1) end
  end, w, src)
end
local d = oneway(function(w, src) w:put_signal(peer, me * n, src, 0, n, 0, 1, "add") end)
local e = oneway(function(w, src) w:put(peer, me * n, src, 0, n); w:signal(peer, 0, "add", 1); w:flush() end)
local f = oneway(function(w, src) w:put(peer, me * n, src, 0, n); w:flush(); w:signal(peer, 0, "add", 1) end)
local own = lc.plan(function(w, src) w:put(me, me * n, src, 0, n); w:flush() end, w, src)
-- (on slot 1, where no other plan signals)
local step = lc.plan(function(w, src)
  w:put(me, me * n, src, 0, n)
  w:put_signal(peer, me * n, src, 0, n, 1, 1, "add")
  w:wait_signal_from(peer, 1, ">=", 1)
  w:flush()
end, w, src)
local a, b, c = timed(put, 10), timed(ex, 10), timed(ex1, 10)
local o, st = timed(own, 10), timed(step, 10)
local dd, ee, ff = timed(d, 10), timed(e, 10), timed(f, 10)
if lc.rank == 0 then
  print(("n=%d put+flush both %.1f us; exchange put_signal+wait both %.1f us; one way %.1f us"):format(n, a, b, c))
  print(("n=%d own copy %.1f us; own copy then exchange %.1f us"):format(n, o, st))
  print(("n=%d one way: put_signal, no flush %.1f us; put, signal, flush %.1f us; put, flush, signal %.1f us"):format(n, dd, ee, ff))
end
