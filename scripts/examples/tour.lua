-- A tour of luacoll: run it with `luacoll run -n 4` (the default script)
-- or `luacoll run -n 4 examples/tour.lua`. Every step checks its result.
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local right, left = (me + 1) % size, (me - 1 + size) % size

if me == 0 then
  lc.log("luacoll %s: %d ranks on %s", lc.version, size, lc.device())
end

-- 1. A window: 64 KiB per rank that every peer can write.
local w = lc.window{ bytes = 64 * 1024, signals = 4, counters = 2 }
lc.log("window ready; transport to rank %d: %s", right, w:transport(right))

-- 2. put + signal: send 4 KiB of iota words to the right neighbour.
local src = lc.buffer(4096)
src:fill("iota", me * 1000)
w:put_signal(right, 0, src, 0, 4096, 0)     -- signal slot 0, add 1
w:wait_signal_from(left, 0, ">=", 1)         -- wait for the left neighbour's data
w:sync()
local first = w:buffer():get_u32(0)
assert(first == left * 1000, ("rank %d: expected %d from rank %d, got %d"):format(me, left * 1000, left, first))
lc.log("got 4 KiB from rank %d, first word %d, checksum %s", left, first, w:buffer():checksum(0, 4096))

-- 3. A barrier on window slot 0 (monotonic: reuse it as often as you like).
for _ = 1, 3 do w:barrier(0) end
w:sync()

-- 4. Local-completion counters: count our own puts to the right.
for i = 1, 5 do
  w:put_counter(right, 8192 + i * 64, src, 0, 64, 1)  -- counter 1, add 1
end
w:wait_counter(right, 1, "==", 5)
w:sync()
lc.log("counter for rank %d reads %d", right, w:read_counter(right, 1))

-- 5. Signals from everyone: each rank adds its rank + 1 to every other rank.
w:signal_all(2, "add", me + 1)
local expect = math.floor(size * (size + 1) / 2) - (me + 1)
w:wait_signal(2, "==", expect)
w:sync()
lc.log("slot 2 sums to %d", w:read_signal(2))

-- 6. A ring all-gather written in Lua (scripts/lib/allgather.lua).
local ag = require("allgather")
local n = 4096
local chunk = lc.buffer(n)
chunk:fill("rand", 42 + me)
local t = lc.timer()
t:start()
ag.ring(w, chunk, 0, n, { signal = 3 })  -- slot 3: the schedule's own
t:stop()
local secs = t:seconds()
for r = 0, size - 1 do
  local ref = lc.buffer(n)
  ref:fill("rand", 42 + r)
  assert(w:buffer():equal(ref, r * n, 0, n), ("rank %d: chunk %d differs"):format(me, r))
  ref:free()
end
lc.log("ring all-gather of %d x %d bytes checked in %.1f us", size, n, secs * 1e6)

-- 7. Small values over the bootstrap, then timings of a barrier.
local all = lc.allgather({ rank = me, pid_even = (me % 2 == 0) })
assert(#all == size and all[size].rank == size - 1)
local t2 = lc.timer()
t2:start()
for _ = 1, 100 do w:barrier(1) end
t2:stop()
local us = t2:seconds() / 100 * 1e6
if me == 0 then lc.log("window barrier: %.1f us per barrier at %d ranks", us, size) end

w:free()
src:free()
chunk:free()
lc.barrier()
if me == 0 then lc.log("tour done") end
