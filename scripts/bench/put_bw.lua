-- Put bandwidth from rank 0 to rank 1, 1 MiB .. max MiB.
--   luacoll run -n 2 bench/put_bw.lua [max_mib] [iterations]
local lc = require("luacoll")
local max = tonumber(arg[1] or "256") * 1024 * 1024
local iters = tonumber(arg[2] or "5")
assert(lc.size >= 2, "put_bw needs at least 2 ranks")
local w = lc.window{ bytes = max }
local src = lc.buffer(max)
src:fill("rand", 7)
local size = 1024 * 1024
if lc.rank == 0 then lc.log("%12s %10s %10s", "bytes", "time(us)", "GB/s") end
while size <= max do
  w:barrier(); w:sync()
  if lc.rank == 0 then
    w:put(1, 0, src, 0, size); w:sync()  -- warm-up
    local t = lc.timer()
    t:start()
    for _ = 1, iters do w:put(1, 0, src, 0, size) end
    t:stop()
    local s = t:seconds() / iters
    lc.log("%12d %10.1f %10.2f", size, s * 1e6, size / s / 1e9)
  end
  size = size * 4
end
w:barrier(); w:sync()
if lc.rank == 1 then
  assert(w:buffer():equal(src, 0, 0, math.floor(max / 4)), "data differs")
end
w:free()
