-- All-gather schedules written in plain window calls.
--
--   local ag = require("allgather")
--   ag.ring(w, src, src_off, n)    -- every rank's n bytes land in every window at rank * n
--   ag.direct(w, src, src_off, n)
--   ag.hier(w, src, src_off, n)     -- two levels: across nodes, then within each node
--
-- src may be the window itself with src_off == lc.rank * n (in place).
-- All record into plans (lc.plan) and pass p:verify{collective = "allgather"}.
-- Each call starts with a window barrier (slot opts.barrier, default 0) so
-- that a call never overwrites data a slow peer is still forwarding from the
-- previous one, or that its script has not read yet. Signals are
-- cumulative: the module remembers how many it expects from each sender on
-- each slot, so no reset is needed between calls, but the slot
-- (opts.signal, default 0) must be used by these schedules alone.
--
-- ring, direct and hier with opts.staging = OFF (2 * lc.size * n bytes of the
-- window at OFF that nothing else uses) need no barrier: the chunks land in
-- a staging half, and each rank copies them into place once they are all
-- there. Calls alternate between the two halves (per window): a peer can
-- be at most one call ahead, since finishing a call needs every rank's
-- chunk of it, which a rank sends only once its previous call is over. A
-- plan records one half, so record two plans (two calls) and run them in
-- turn, as `luacoll bench allgather --plan` does.
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

-- start is how ring and direct begin without staging: the guard barrier
-- and the own chunk's copy into the window (skipped in place), left to
-- complete while what follows reads src, not the window (they end with a
-- flush, which completes it). It returns the signal slot and the expected
-- counts per sender on it.
local function start(w, src, src_off, n, opts)
  opts = opts or {}
  local sig, me = opts.signal or 0, lc.rank
  local r = rows(w, sig)
  w:barrier(opts.barrier or 0)
  if src ~= w or src_off ~= me * n then
    w:put(me, me * n, src, src_off, n)
  end
  return sig, r
end

-- begin is start with the own chunk in place before anything else (hier's
-- puts read it from the window).
local function begin(w, src, src_off, n, opts)
  local sig, r = start(w, src, src_off, n, opts)
  if src ~= w or src_off ~= lc.rank * n then
    w:flush()
  end
  return sig, r
end

-- half[w] is the staging half a window's next staged call uses.
local half = setmetatable({}, { __mode = "k" })

-- staged begins a call with opts.staging: the signal slot, the expected
-- counts, and the offset of this call's staging half (chunk r of it at
-- + r * n).
local function staged(w, n, opts)
  local sig = opts.signal or 0
  local h = half[w] or 0
  half[w] = 1 - h
  return sig, rows(w, sig), opts.staging + h * lc.size * n
end

-- settle ends a staged call: every chunk from the staging half into place,
-- this rank's own from src (skipped in place), complete before the call
-- ends (the next call's copies write the same bytes).
local function settle(w, src, src_off, n, base)
  local me = lc.rank
  for q = 0, lc.size - 1 do
    if q ~= me then
      w:put(me, q * n, w, base + q * n, n)
    elseif src ~= w or src_off ~= me * n then
      w:put(me, me * n, src, src_off, n)
    end
  end
  w:flush()
end

-- ring_steps runs the ring's size-1 steps over the chunks at offset at of
-- the windows (0, or a staging half); step 0 sends this rank's chunk from
-- first at first_off when given, else from the window.
local function ring_steps(w, sig, r, n, at, first, first_off)
  local me, size = lc.rank, lc.size
  local right, left = (me + 1) % size, (me - 1 + size) % size
  for s = 0, size - 2 do
    local chunk = (me - s + size) % size
    local from, off = w, at + chunk * n
    if s == 0 and first then from, off = first, first_off end
    w:put_signal(right, at + chunk * n, from, off, n, sig, 1, "add")
    r[left] = r[left] + 1
    w:wait_signal_from(left, sig, ">=", r[left])
  end
end

--- Ring: size-1 steps; in step s each rank forwards chunk (rank - s) to its
--- right neighbour and waits for chunk (rank - s - 1) from its left.
function M.ring(w, src, src_off, n, opts)
  if opts and opts.staging then
    local sig, r, base = staged(w, n, opts)
    ring_steps(w, sig, r, n, base, src, src_off)
    settle(w, src, src_off, n, base)
    return
  end
  local sig, r = start(w, src, src_off, n, opts)
  ring_steps(w, sig, r, n, 0, src, src_off)
  w:flush()
end

--- Direct: every rank writes its chunk straight into every peer's window,
--- peers in the order rank+1, rank+2, ... (no incast), then waits for all.
function M.direct(w, src, src_off, n, opts)
  if opts and opts.staging then
    local sig, r, base = staged(w, n, opts)
    local me, size = lc.rank, lc.size
    for i = 1, size - 1 do
      local peer = (me + i) % size
      w:put_signal(peer, base + me * n, src, src_off, n, sig, 1, "add")
    end
    -- One wait per sender: with no barrier a peer may be a call ahead,
    -- and its next signal must not stand in for a slower peer's in a sum.
    for i = 1, size - 1 do
      local peer = (me - i + size) % size
      r[peer] = r[peer] + 1
      w:wait_signal_from(peer, sig, ">=", r[peer])
    end
    settle(w, src, src_off, n, base)
    return
  end
  local sig, r = start(w, src, src_off, n, opts)
  local me, size = lc.rank, lc.size
  local total = 0
  for i = 1, size - 1 do
    local peer = (me + i) % size
    w:put_signal(peer, me * n, src, src_off, n, sig, 1, "add")
    r[peer] = r[peer] + 1
  end
  for i = 0, size - 1 do total = total + r[i] end
  w:wait_signal(sig, ">=", total)
  w:flush()
end

-- nodes groups the ranks into nodes: opts.nodes = K splits them into K
-- blocks of consecutive ranks (for trying the schedule on one machine);
-- otherwise lc.nodes() says (two ranks share a node when neither reaches
-- the other over the network). It returns, for this rank, its local index
-- and, per node (in the order of their lowest rank), the node's ranks in
-- order, and this rank's node.
local function nodes(opts)
  local size, me = lc.size, lc.rank
  local groups, li, mine
  if opts.nodes then
    local k = opts.nodes
    assert(k >= 1 and size % k == 0, ("allgather.hier: nodes = %d does not divide %d ranks"):format(k, size))
    local per = size / k
    groups = {}
    for g = 1, k do
      groups[g] = {}
      for r = (g - 1) * per, g * per - 1 do groups[g][#groups[g] + 1] = r end
    end
    mine = math.floor(me / per) + 1
    li = me % per + 1
  else
    local t = lc.nodes()
    groups, li, mine = t.groups, t.local_index, t.node
  end
  for _, g in ipairs(groups) do
    assert(#g == #groups[1], "allgather.hier: nodes with different numbers of ranks")
  end
  return li, groups, mine
end

--- Hier (two levels): the ranks with the same local index on every node
--- exchange their chunks directly (the network level), and each rank
--- forwards what arrived to the other ranks of its node, piece by piece as
--- the pieces arrive (opts.pieces, default one per MiB up to 8), so that
--- the two levels overlap; its own chunk goes to its node's ranks first.
--- opts.nodes = K forces K nodes of consecutive ranks; by default the nodes
--- are the groups of ranks that reach each other without the network.
--- With opts.staging the chunks travel through a staging half, as ring's
--- and direct's do, and no barrier opens the call.
function M.hier(w, src, src_off, n, opts)
  opts = opts or {}
  local li, groups, mine = nodes(opts)
  local me = lc.rank
  -- at: where chunks land (0, or the staging half); own, own_off: where
  -- this rank's chunk is read from.
  local sig, r, at, own, own_off
  if opts.staging then
    sig, r, at = staged(w, n, opts)
    own, own_off = src, src_off
  else
    sig, r = begin(w, src, src_off, n, opts)
    at, own, own_off = 0, w, me * n
  end
  local pieces = opts.pieces or math.max(1, math.min(8, math.ceil(n / 1048576)))
  if pieces > n then pieces = math.max(n, 1) end
  local function piece(p) -- offset and length of piece p (0-based) of a chunk
    local base = math.floor(n / pieces)
    local off = p * base
    local len = (p == pieces - 1) and (n - off) or base
    return off, len
  end
  local locals = groups[mine]
  -- 1. This rank's chunk: to the same local index on every other node
  -- (pieces, so their forwarding can start early), then to its node.
  for k = 1, #groups - 1 do
    local node = groups[(mine - 1 + k) % #groups + 1]
    local peer = node[li]
    for p = 0, pieces - 1 do
      local off, len = piece(p)
      w:put_signal(peer, at + me * n + off, own, own_off + off, len, sig, 1, "add")
    end
  end
  for i = 1, #locals - 1 do
    local peer = locals[(li - 1 + i) % #locals + 1]
    w:put_signal(peer, at + me * n, own, own_off, n, sig, 1, "add")
  end
  -- 2. What arrives from the other nodes, forwarded within the node piece
  -- by piece.
  for k = 1, #groups - 1 do
    local node = groups[(mine - 1 + #groups - k) % #groups + 1]
    local from = node[li]
    for p = 0, pieces - 1 do
      local off, len = piece(p)
      r[from] = r[from] + 1
      w:wait_signal_from(from, sig, ">=", r[from])
      local at_from = at + from * n + off
      for i = 1, #locals - 1 do
        local peer = locals[(li - 1 + i) % #locals + 1]
        w:put_signal(peer, at_from, w, at_from, len, sig, 1, "add")
      end
    end
  end
  -- 3. Every local peer sent its own chunk and pieces of each other node's.
  for i = 1, #locals - 1 do
    local peer = locals[(li - 1 + i) % #locals + 1]
    r[peer] = r[peer] + 1 + (#groups - 1) * pieces
    w:wait_signal_from(peer, sig, ">=", r[peer])
  end
  if opts.staging then settle(w, src, src_off, n, at) end
end

return M
