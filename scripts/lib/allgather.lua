-- All-gather schedules written in plain window calls.
--
--   local ag = require("allgather")
--   ag.ring(w, src, src_off, n)    -- every rank's n bytes land in every window at rank * n
--   ag.direct(w, src, src_off, n)
--
-- src may be the window itself with src_off == lc.rank * n (in place).
-- Both record into plans (lc.plan) and pass p:verify{collective = "allgather"}.
-- Each call starts with a window barrier (slot opts.barrier, default 0) so
-- that a call never overwrites data a slow peer is still forwarding from the
-- previous one. Signals are cumulative: the module remembers how many it
-- expects from each sender on each slot, so no reset is needed between
-- calls, but the slot (opts.signal, default 0) must be used by these
-- schedules alone.
local lc = require("luacoll")

local M = {}

-- expected[w][sig][sender] = signals received so far from sender
local expected = setmetatable({}, { __mode = "k" })

local function rows(w, sig)
  local byw = expected[w]
  if not byw then byw = {}; expected[w] = byw end
  local r = byw[sig]
  if not r then
    r = {}
    for i = 0, lc.size - 1 do r[i] = 0 end
    byw[sig] = r
  end
  return r
end

-- begin is what both schedules start with: the guard barrier and the own
-- chunk into place (skipped in place). It returns the signal slot and the
-- expected counts per sender on it.
local function begin(w, src, src_off, n, opts)
  opts = opts or {}
  local sig, me = opts.signal or 0, lc.rank
  local r = rows(w, sig)
  w:barrier(opts.barrier or 0)
  if src ~= w or src_off ~= me * n then
    w:put(me, me * n, src, src_off, n)
    w:flush()   -- the puts below read the chunk from the window
  end
  return sig, r
end

--- Ring: size-1 steps; in step s each rank forwards chunk (rank - s) to its
--- right neighbour and waits for chunk (rank - s - 1) from its left.
function M.ring(w, src, src_off, n, opts)
  local sig, r = begin(w, src, src_off, n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local right, left = (me + 1) % size, (me - 1 + size) % size
  for s = 0, size - 2 do
    local chunk = (me - s + size) % size
    w:put_signal(right, chunk * n, w, chunk * n, n, sig, 1, "add")
    r[left] = r[left] + 1
    w:wait_signal_from(left, sig, ">=", r[left])
  end
end

--- Direct: every rank writes its chunk straight into every peer's window,
--- peers in the order rank+1, rank+2, ... (no incast), then waits for all.
function M.direct(w, src, src_off, n, opts)
  local sig, r = begin(w, src, src_off, n, opts)
  local me, size = lc.rank, lc.size
  local total = 0
  for i = 1, size - 1 do
    local peer = (me + i) % size
    w:put_signal(peer, me * n, w, me * n, n, sig, 1, "add")
    r[peer] = r[peer] + 1
  end
  for i = 0, size - 1 do total = total + r[i] end
  w:wait_signal(sig, ">=", total)
end

return M
