-- All-reduce schedules written in plain window calls.
--
--   local ar = require("all_reduce")
--   ar.ring(w, n, opts)      -- reduce-scatter ring, then all-gather ring
--   ar.one_shot(w, n, opts)  -- every rank pushes its input to all and reduces them all (small sizes)
--   ar.two_shot(w, n, opts)  -- chunk c goes to rank c, which reduces it and puts it to all (small sizes)
--   ar.one_shot_pull, ar.two_shot_pull  -- the same reading the peers' windows (reduce_from)
--   ar.auto(w, n, opts)      -- one of them by size and peers
--   ar.pick(w, n, opts)      -- the name of the one auto runs
--
-- Every rank's input is n bytes of its window at opts.input (default 0); the
-- result, the reduction over all ranks, replaces it on every rank (in
-- place). opts.type (default "f32") and opts.op (default "sum") are
-- w:reduce's; n must be a whole number of elements. The input is cut into
-- lc.size chunks of whole elements (reduce_scatter.even).
-- A bad n, opts.type or opts.op is an error naming it, raised before the
-- schedule enqueues anything (reduce_scatter.check).
--
-- Every rank gets the same bits, and two runs of a job give the same bits:
-- each chunk is reduced once, in a fixed order (ring: as reduce_scatter.ring;
-- one_shot, two_shot and one_shot_pull: ranks 0, 1, ..., size-1; two_shot_pull:
-- the chunk's owner, then the ranks after it), and copied to the others.
--
-- Scratch, in the window at opts.scratch (default input + n): ring 2 chunks,
-- one_shot 2 * size * n + n bytes, two_shot 2 * size + 1 chunks, one_shot_pull
-- n bytes, two_shot_pull none. one_shot and two_shot stage in two
-- halves opts.half bytes apart (default size * n, size chunks): calls of
-- different sizes pass one opts.half or meet in between (see
-- reduce_scatter.stage). The ring's, as reduce_scatter.ring's,
-- must be used by nothing else (a peer may write there for its next call
-- while this rank still reads its result): calls of different sizes pass one
-- opts.scratch past the largest input. Signal slots opts.signal (default
-- 0) to opts.signal + 3, shared with reduce_scatter's schedules, cumulative
-- as there.
local lc = require("luacoll")
local rs = require("reduce_scatter")

local M = {}

-- setup checks the arguments of schedule what (error naming them at the
-- caller's caller: the script's line) and returns the options, the chunks
-- and the largest chunk.
local function setup(what, n, opts)
  rs.check("all_reduce." .. what, n, opts, 3)
  local t = (opts and opts.type) or "f32"
  local offs, lens, most = rs.even(n, rs.esize(t))
  return rs.options(opts, most, n), offs, lens, most
end

--- Ring: reduce_scatter's ring over the chunks, after which rank r holds
--- chunk r reduced, then size - 1 all-gather steps: in step s each rank
--- puts chunk (rank - s) into its right neighbour's window, in place, and
--- waits for chunk (rank - s - 1) from its left.
function M.ring(w, n, opts)
  local o, offs, lens = setup("ring", n, opts)
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

--- One-shot (small sizes): each rank puts its whole input into every
--- peer's staging area, waits for theirs and reduces all of them, ranks
--- 0..size-1 in order, into its input: one one-way latency. Its puts must
--- have read the input before the reduction overwrites it, so a flush
--- comes first (the peers' signals say that their data landed here, not
--- that this rank's left). The staging
--- areas alternate between two halves (scratch: 2 * size * n + n bytes): a
--- peer can be at most one call ahead, since finishing a call needs every
--- rank's input of it, which a rank sends only once its previous call is
--- over.
function M.one_shot(w, n, opts)
  local o = setup("one_shot", n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at = rs.stage(w, o, n)
  rs.own(w, o, o.input, n, at, n)
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, at + me * n, w, o.input, n, o.sig, 1, "add")
  end
  rs.waits(w, o)
  w:flush()
  rs.fold(w, o, o.input, n, at, n, o.scratch + 2 * (o.half or size * n))
end

--- Two-shot (small sizes): each rank puts chunk c of its input into rank
--- c's staging area, waits for its chunk from every peer, reduces it
--- (ranks 0..size-1 in order) and puts the result into every peer's
--- window, then waits for every peer's chunk: two one-way latencies. The
--- staging halves alternate as one_shot's (scratch: 2 * size * chunk +
--- chunk bytes).
function M.two_shot(w, n, opts)
  local o, offs, lens, most = setup("two_shot", n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at = rs.stage(w, o, most)
  local off, len = o.input + offs[me], lens[me]
  rs.own(w, o, off, len, at, most)
  for i = 1, size - 1 do
    local c = (me + i) % size
    w:put_signal(c, at + me * most, w, o.input + offs[c], lens[c], o.sig, 1, "add")
  end
  rs.waits(w, o)
  rs.fold(w, o, off, len, at, most, o.scratch + 2 * (o.half or size * most))
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, off, w, off, len, o.sig, 1, "add")
  end
  rs.waits(w, o)
  w:flush()
end

--- One-shot, pulling: once every input is in place, each rank reduces the whole
--- input of ranks 0..size-1 into its scratch; once every rank is done
--- reading, it copies the result over its input, flushed: the next call's
--- peers read that input (and this rank its scratch) once it meets them.
function M.one_shot_pull(w, n, opts)
  local o = setup("one_shot_pull", n, opts)
  if lc.size == 1 then return end
  rs.meet(w, o.ready)
  w:get(0, o.input, w, o.scratch, n)
  w:flush()
  for p = 1, lc.size - 1 do
    w:reduce_from(p, o.input, w, o.scratch, n, o.type, o.op)
  end
  rs.meet(w, o.done)
  w:put(lc.rank, o.input, w, o.scratch, n)
  w:flush()
end

--- Two-shot, pulling: once every input is in place, each rank reduces its
--- chunk in place from every peer's window (reduce_from), peers in the
--- order rank+1, rank+2, ... (as reduce_scatter.direct), puts it into
--- every peer's window and waits for everyone's. No rank waits for the
--- others to finish reading first: a rank's puts write only its own
--- chunk's place in a peer's window, which no other rank reads and this
--- rank read before. No scratch, and each byte is read once from a peer:
--- the least memory traffic of the schedules for large sizes where the
--- peers are mapped.
function M.two_shot_pull(w, n, opts)
  local o, offs, lens = setup("two_shot_pull", n, opts)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at, len = o.input + offs[me], lens[me]
  rs.meet(w, o.ready)
  for i = 1, size - 1 do
    w:reduce_from((me + i) % size, at, w, at, len, o.type, o.op)
  end
  for i = 1, size - 1 do
    w:put_signal((me + i) % size, at, w, at, len, o.sig, 1, "add")
  end
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

--- Auto: one_shot up to opts.one_shot_max bytes, two_shot up to
--- opts.two_shot_max; above, two_shot_pull where every peer is mapped,
--- else the ring. Where every peer is host shared memory they default to
--- 4 KiB and 0 (two_shot_pull above 4 KiB: on the host it measured 2-5 x
--- faster than one_shot and two_shot from 8 KiB on 2 and 4 ranks, one_shot
--- the fastest at 1-4 KiB, docs/results/reductions.md), elsewhere to
--- 64 KiB and 256 KiB (on 2 and 4 GPUs, device-mode plans of one_shot
--- took 0.5-0.8 x two_shot's time from 1 to 64 KiB). Scratch: what the
--- schedule of the size needs.
function M.auto(w, n, opts)
  rs.check("all_reduce.auto", n, opts, 2)
  return M[M.pick(w, n, opts)](w, n, opts)
end

--- Pick: the name of the schedule auto runs for these arguments
--- ("one_shot", "two_shot", "two_shot_pull" or "ring"); it enqueues nothing.
function M.pick(w, n, opts)
  local host = rs.shared_all(w)
  local two = opts and opts.two_shot_max or (host and 0 or 262144)
  if n <= (opts and opts.one_shot_max or (host and 4096 or 65536)) then
    return "one_shot"
  elseif n <= two then
    return "two_shot"
  elseif rs.mapped_all(w) then
    return "two_shot_pull"
  end
  return "ring"
end

return M
