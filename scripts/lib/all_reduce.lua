-- All-reduce schedules written in plain window calls.
--
--   local ar = require("all_reduce")
--   ar.ring(w, n, opts)      -- reduce-scatter ring, then all-gather ring
--   ar.one_shot(w, n, opts)  -- every rank pushes its input to all and reduces them all (small sizes)
--   ar.two_shot(w, n, opts)  -- chunk c goes to rank c, which reduces it and puts it to all (small sizes)
--   ar.one_shot_pull, ar.two_shot_pull  -- the same reading the peers' windows (reduce_from)
--
-- Every rank's input is n bytes of its window at opts.input (default 0); the
-- result, the reduction over all ranks, replaces it on every rank (in
-- place). opts.type (default "f32") and opts.op (default "sum") are
-- w:reduce's; n must be a whole number of elements. The input is cut into
-- lc.size chunks of whole elements (reduce_scatter.even).
--
-- Every rank gets the same bits, and two runs of a job give the same bits:
-- each chunk is reduced once, in a fixed order (ring: as reduce_scatter.ring;
-- one_shot and two_shot: ranks 0, 1, ..., size-1), and copied to the others.
--
-- Scratch, in the window at opts.scratch (default input + n): ring 2 chunks,
-- one_shot 2 * size * n + n bytes, two_shot 2 * size + 1 chunks, one_shot_pull
-- n bytes, two_shot_pull one chunk. one_shot and two_shot stage in two
-- halves opts.half bytes apart (default size * n, size chunks): calls of
-- different sizes pass one opts.half or meet in between (see stage). The ring's, as reduce_scatter.ring's,
-- must be used by nothing else (a peer may write there for its next call
-- while this rank still reads its result): calls of different sizes pass one
-- opts.scratch past the largest input. Signal slots opts.signal (default
-- 0) to opts.signal + 3, shared with reduce_scatter's schedules, cumulative
-- as there.
local lc = require("luacoll")
local rs = require("reduce_scatter")

local M = {}

-- setup returns the options, the chunks and the largest chunk.
local function setup(w, n, opts)
  local t = (opts and opts.type) or "f32"
  local offs, lens, most = rs.even(n, rs.esize(t))
  return rs.options(opts, most, n), offs, lens, most
end

--- Ring: reduce_scatter's ring over the chunks, after which rank r holds
--- chunk r reduced, then size - 1 all-gather steps: in step s each rank
--- puts chunk (rank - s) into its right neighbour's window, in place, and
--- waits for chunk (rank - s - 1) from its left.
function M.ring(w, n, opts)
  local o, offs, lens = setup(w, n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  rs.ring_steps(w, offs, lens, o)
  local right, left = (me + 1) % size, (me - 1) % size
  -- The right neighbour has reduced everything this rank sent it: its
  -- reduce-scatter is over, so its chunks can be overwritten.
  w:wait_signal_from(right, o.ack, ">=", rs.rows(w, "rs_out")[right])
  local data = rs.rows(w, o.sig)
  for s = 0, size - 2 do
    local c = (me - s) % size
    w:put_signal(right, o.input + offs[c], w, o.input + offs[c], lens[c], o.sig, 1, "add")
    data[left] = data[left] + 1
    w:wait_signal_from(left, o.sig, ">=", data[left])
  end
  w:flush()
end

-- half[w] is the staging half the next staged call of a window uses.
local half = setmetatable({}, { __mode = "k" })

-- stage returns this call's staging half (base offset) for slots of
-- slot bytes, one per rank, and flips the window's half. The halves are
-- opts.half bytes apart (default size * slot): calls of different sizes
-- either pass one opts.half for all (at least size times the largest slot)
-- or meet (lc.barrier) in between, else a peer's next call may write where
-- this rank still reads.
local function stage(w, o, slot)
  local h = half[w] or 0
  half[w] = 1 - h
  return o.scratch + h * (o.half or lc.size * slot)
end

-- waits waits for one signal from every peer on the data slot, one wait
-- per sender (a peer that is a call ahead must not stand in for a slow
-- one in a sum).
local function waits(w, o)
  local me, size, data = lc.rank, lc.size, rs.rows(w, o.sig)
  for i = 1, size - 1 do
    local q = (me - i) % size
    data[q] = data[q] + 1
    w:wait_signal_from(q, o.sig, ">=", data[q])
  end
end

-- fold reduces the len bytes at off of every rank, in rank order 0..size-1,
-- into this rank's window at off: rank q's bytes are at at + q * slot of
-- the staging half, this rank's own at off. Rank 0 folds in place; the
-- others fold into tmp first (the order must not start with their own).
local function fold(w, o, off, len, at, slot, tmp)
  local me, size = lc.rank, lc.size
  local dst = off
  if me ~= 0 then
    dst = tmp
    w:put(me, tmp, w, at, len)
    w:flush() -- (free where no peer is over the network)
  end
  for q = 1, size - 1 do
    local src = (q == me) and off or (at + q * slot)
    w:reduce(w, dst, w, src, len, o.type, o.op)
  end
  if me ~= 0 then
    w:put(me, off, w, tmp, len)
  end
end

--- One-shot (small sizes): each rank puts its whole input into every
--- peer's staging area, waits for theirs and reduces all of them, ranks
--- 0..size-1 in order, into its input: one one-way latency. The staging
--- areas alternate between two halves (scratch: 2 * size * n + n bytes): a
--- peer can be at most one call ahead, since finishing a call needs every
--- rank's input of it, which a rank sends only once its previous call is
--- over.
function M.one_shot(w, n, opts)
  local o = setup(w, n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at = stage(w, o, n)
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, at + me * n, w, o.input, n, o.sig, 1, "add")
  end
  waits(w, o)
  fold(w, o, o.input, n, at, n, o.scratch + 2 * (o.half or size * n))
end

--- Two-shot (small sizes): each rank puts chunk c of its input into rank
--- c's staging area, waits for its chunk from every peer, reduces it
--- (ranks 0..size-1 in order) and puts the result into every peer's
--- window, then waits for every peer's chunk: two one-way latencies. The
--- staging halves alternate as one_shot's (scratch: 2 * size * chunk +
--- chunk bytes).
function M.two_shot(w, n, opts)
  local o, offs, lens, most = setup(w, n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at = stage(w, o, most)
  for i = 1, size - 1 do
    local c = (me + i) % size
    w:put_signal(c, at + me * most, w, o.input + offs[c], lens[c], o.sig, 1, "add")
  end
  waits(w, o)
  local off, len = o.input + offs[me], lens[me]
  fold(w, o, off, len, at, most, o.scratch + 2 * (o.half or size * most))
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, off, w, off, len, o.sig, 1, "add")
  end
  waits(w, o)
  w:flush()
end

--- One-shot, pulling: once every input is in place, each rank reduces the whole
--- input of ranks 0..size-1 into its scratch; once every rank is done
--- reading, it copies the result over its input.
function M.one_shot_pull(w, n, opts)
  local o = setup(w, n, opts)
  if lc.size == 1 then return end
  rs.meet(w, o.ready)
  w:get(0, o.input, w, o.scratch, n)
  w:flush()
  for p = 1, lc.size - 1 do
    w:reduce_from(p, o.input, w, o.scratch, n, o.type, o.op)
  end
  rs.meet(w, o.done)
  w:put(lc.rank, o.input, w, o.scratch, n)
end

--- Two-shot, pulling: once every input is in place, each rank reduces its chunk of
--- ranks 0..size-1 into its scratch; once every rank is done reading, it
--- puts the chunk into every window (its own included), peers in the
--- order rank+1, rank+2, ..., and waits for everyone's.
function M.two_shot_pull(w, n, opts)
  local o, offs, lens = setup(w, n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at, len = o.input + offs[me], lens[me]
  rs.meet(w, o.ready)
  w:get(0, at, w, o.scratch, len)
  w:flush()
  for p = 1, size - 1 do
    w:reduce_from(p, at, w, o.scratch, len, o.type, o.op)
  end
  rs.meet(w, o.done)
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, at, w, o.scratch, len, o.sig, 1, "add")
  end
  w:put(me, at, w, o.scratch, len)
  -- One wait per sender: a peer that has all its chunks may start a ring
  -- call, whose signals on the slot must not stand in for a slower
  -- peer's chunk in a sum.
  local data = rs.rows(w, o.sig)
  for i = 1, size - 1 do
    local p = (me - i) % size
    data[p] = data[p] + 1
    w:wait_signal_from(p, o.sig, ">=", data[p])
  end
  w:flush()
end

return M
