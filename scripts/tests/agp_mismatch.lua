-- Ranks passing different n to one exec must fail clearly, with small,
-- mid and large execs (on CUDA paths "sm" and auto: flagged lines, staged
-- parts and the one-kernel exec at 2 to 8 ranks, the sizes of every rank
-- on the same protocol), every rank naming the
-- mismatch as soon as the other's tag arrives (long before the window's
-- 30 s timeout), and the all-gather can still be destroyed.
--   luacoll run -n 2 [--device cuda] tests/agp_mismatch.lua [path]
local lc = require("luacoll")
local me = lc.rank
local path = arg[1]
local passed = 0
for _, n in ipairs({ 64, 524288, 8388608 }) do
  local mine = n + me
  local w = lc.window{ bytes = (n + lc.size) * lc.size, timeout_ms = 30000, path = path }
  local ag = lc.allgather_persistent{ window = w }
  local src = lc.buffer(n + lc.size)
  local t0 = lc.now()
  ag:exec(src, 0, mine)
  local ok, err = pcall(lc.sync)
  local took = lc.now() - t0
  assert(not ok, ("n=%d: the mismatch went unnoticed"):format(mine))
  err = tostring(err)
  assert(err:find("n differs across ranks", 1, true) and err:find(("this rank n=%d"):format(mine), 1, true), err)
  assert(err:find("seen as soon as", 1, true) and took < 10, ("n=%d: reported after %.1f s: %s"):format(mine, took, err))
  ag:destroy(); src:free(); w:free()
  passed = passed + 1
end
lc.barrier()
if me == 0 then print(("agp_mismatch: %d passed, 0 failed"):format(passed)) end
