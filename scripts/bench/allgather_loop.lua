-- The persistent all-gather from a Lua loop: n bytes a rank, 50 warm-up
-- execs, then execs back to back timed on the stream (lc.timer).
--   luacoll run -n 2 --nodes 2 bench/allgather_loop.lua [n [execs]]
local lc = require("luacoll")
local n = tonumber(arg[1] or "512")
local execs = tonumber(arg[2] or "1000")
local w = lc.window{ bytes = n * lc.size }
local src = lc.buffer(n)
src:fill("rand", lc.rank)
local ag = lc.allgather_persistent{ window = w }
for _ = 1, 50 do ag:exec(src, 0, n) end
lc.sync()
lc.barrier()
local t = lc.timer()
t:start()
for _ = 1, execs do ag:exec(src, 0, n) end
t:stop()
lc.sync()
local ref = lc.buffer(n)
for r = 0, lc.size - 1 do
  ref:fill("rand", r)
  assert(w:buffer():equal(ref, r * n, 0, n), ("rank %d: chunk %d differs"):format(lc.rank, r))
end
if lc.rank == 0 then
  print(("allgather_loop: %d bytes a rank, %d execs: %.2f us per exec"):format(n, execs, t:seconds() * 1e6 / execs))
end
ag:destroy()
w:free()
