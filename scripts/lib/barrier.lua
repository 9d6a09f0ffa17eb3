-- Dissemination barrier over window signals: ceil(log2(size)) rounds; in
-- round k each rank signals rank + 2^k and waits for rank - 2^k. Every
-- sender reaches a given rank at most once per barrier, so one slot and
-- per-sender rows count barriers without any reset.
--
--   local bar = require("barrier")
--   bar.dissemination(w, sig)   -- sig defaults to 2
local lc = require("luacoll")

local M = {}
local epochs = setmetatable({}, { __mode = "k" })

function M.dissemination(w, sig)
  sig = sig or 2
  local me, size = lc.rank, lc.size
  epochs[w] = (epochs[w] or 0) + 1
  local e = epochs[w]
  local dist = 1
  while dist < size do
    w:signal((me + dist) % size, sig, "add", 1)
    w:wait_signal_from((me - dist + size) % size, sig, ">=", e)
    dist = dist * 2
  end
end

return M
