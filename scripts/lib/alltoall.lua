-- Pairwise all-to-all: src holds size chunks of n bytes; chunk j goes to
-- rank j's window at offset rank * n. In step i each rank sends to
-- rank + i and the pairs never collide.
--
--   local a2a = require("alltoall")
--   a2a.pairwise(w, src, src_off, n)
local lc = require("luacoll")

local M = {}
local calls = setmetatable({}, { __mode = "k" })

function M.pairwise(w, src, src_off, n, opts)
  opts = opts or {}
  local sig, bar = opts.signal or 1, opts.barrier or 0
  local me, size = lc.rank, lc.size
  calls[w] = (calls[w] or 0) + 1
  w:barrier(bar)
  w:put(me, me * n, src, src_off + me * n, n)
  for i = 1, size - 1 do
    local peer = (me + i) % size
    w:put_signal(peer, me * n, src, src_off + peer * n, n, sig, 1, "add")
  end
  w:wait_signal(sig, ">=", calls[w] * (size - 1))
end

return M
