-- An exec refused on one rank (a bad argument) still counts there: the
-- other ranks' waits for it fail, at once on the host and on CUDA path ce
-- (naming the refusing rank), at the window timeout on path sm's
-- one-launch protocols; the next exec gathers the right data everywhere.
--   luacoll run -n 2 [--device cuda] tests/agp_refused.lua [path [graph [n]]]
-- (n bytes a rank, 1 MiB by default; across nodes 64 KiB and less run the
-- staged protocol, with no guard barrier)
local lc = require("luacoll")
local path = arg[1]
if path == "" then path = nil end
local graph = arg[2] == "graph"
local n = tonumber(arg[3] or "1048576")
local w = lc.window{ bytes = n * lc.size, timeout_ms = 20000, path = path }
local ag = lc.allgather_persistent{ window = w, graph = graph }
local src = lc.buffer(n)
src:fill("iota", lc.rank * 1000)
local t0 = lc.now()
local ok, err = pcall(function()
  if lc.rank == 0 then ag:exec(src, 0, n * lc.size) else ag:exec(src, 0, n) end
  w:sync()
end)
local took = lc.now() - t0
err = tostring(err)
assert(not ok, "the refused exec went unnoticed")
if lc.rank == 0 then
  assert(err:find("bad argument 'n'", 1, true), err)
else
  assert(path == "sm" or (err:find("rank 0 refused it", 1, true) or err:find("a peer refused it", 1, true)) and took < 10,
    ("reported after %.1f s: %s"):format(took, err))
end
pcall(function() w:sync() end) -- a refusing CUDA rank's own handshake fails too
src:fill("iota", lc.rank * 1000 + 7)
ag:exec(src, 0, n)
w:sync()
for r = 0, lc.size - 1 do
  local ref = lc.buffer(n); ref:fill("iota", r * 1000 + 7)
  assert(w:buffer():equal(ref, r * n, 0, n), "chunk " .. r .. " of the exec after the refused one")
  ref:free()
end
ag:destroy(); src:free(); w:free()
lc.barrier()
if lc.rank == 0 then print("agp_refused: 1 passed, 0 failed") end
