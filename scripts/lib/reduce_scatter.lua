-- Reduce-scatter schedules written in plain window calls.
--
--   local rs = require("reduce_scatter")
--   rs.ring(w, n, opts)     -- chunk r of every rank's input, reduced over all ranks, lands on rank r
--   rs.direct(w, n, opts)   -- the same, each rank pulling its chunk from every peer's window
--   rs.push(w, n, opts)     -- the same, each rank pushing chunk c into rank c's staging area (small sizes)
--   rs.auto(w, n, opts)     -- push, direct or ring by size and peers
--   rs.pick(w, n, opts)     -- the name of the one auto runs
--
-- Every rank's input is lc.size * n bytes of its window at opts.input
-- (default 0), chunk r at input + r * n; the result is in place: rank r's
-- chunk r becomes the reduction of every rank's chunk r. opts.type (default
-- "f32") and opts.op (default "sum") are w:reduce's; n must be a whole number
-- of elements.
-- A bad n, opts.type or opts.op is an error naming it, raised before the
-- schedule enqueues anything (reduce_scatter.check).
--
-- All are deterministic: every chunk is reduced in a fixed order (ring: the
-- ranks after the chunk's owner in ring order, ending with the owner;
-- direct: the owner, then the ranks after it; push: ranks 0..size-1), so
-- two runs of one job give the same bits.
--
-- ring uses 2 * n bytes of scratch at opts.scratch (default right after the
-- input) and signal slots opts.signal (default 0, data) and opts.signal + 1
-- (acknowledgements). Nothing else may use that scratch: a peer may write
-- there for its next call while this rank is still in the last one or
-- reading its result, so calls of different sizes pass one opts.scratch
-- past the largest input. direct uses slots opts.signal + 2 and + 3
-- (meetings before and after the reads) and no scratch.
-- push (and all_reduce's one_shot and two_shot) fold the staged chunks in
-- rank order; a rank that cannot start from its own (rank 2 on, or 1 for
-- ops other than sums and products) folds through scratch and copies back,
-- or, with opts.fold = "staged" (the default on GPU windows), stages its
-- own chunk beside the peers' and folds in place: one pass on the plan
-- interpreter. opts.fold = "tmp" forces the first.
-- Signals are cumulative: the module remembers what it expects from each
-- sender on each slot, so no reset is needed between calls, but the slots
-- must be used by these schedules (and all_reduce's) alone.
local lc = require("luacoll")

local M = {}

-- counts[w][key][peer]: signals received from peer on a slot, or the
-- module's own tallies (key a string).
local counts = setmetatable({}, { __mode = "k" })

--- rows returns the tally of window w under key, one entry per rank.
function M.rows(w, key)
  local byw = counts[w]
  if not byw then byw = {}; counts[w] = byw end
  local r = byw[key]
  if not r then
    r = {}
    for i = 0, lc.size - 1 do r[i] = 0 end
    byw[key] = r
  end
  return r
end

-- made[opts][chunk] is the options table last made from opts for a
-- largest chunk of chunk bytes: tables cost microseconds each in the
-- interpreter, and a call whose opts table is the last one's makes none.
-- The cache holds at most madeMax opts tables (the interpreter keeps weak
-- tables strong: a caller that makes a new opts table every call would
-- fill it).
local made, nmade, madeMax = {}, 0, 64
local noopts = {}

local function same(o, opts, chunk, inbytes)
  return o.slot == chunk and o.inbytes == inbytes and o.type == (opts.type or "f32") and o.op == (opts.op or "sum") and
    o.input == (opts.input or 0) and o.sig == (opts.signal or 0) and o.half == opts.half and
    o.scratch == (opts.scratch or (o.input + inbytes)) and o.fold == opts.fold
end

--- options fills in the defaults of a call whose largest chunk is chunk
--- bytes and whose input is inbytes bytes. The result is shared between
--- calls with the same opts and sizes: callers must not change it.
function M.options(opts, chunk, inbytes)
  opts = opts or noopts
  local byopts = made[opts]
  local o = byopts and byopts[chunk]
  if o and same(o, opts, chunk, inbytes) then return o end
  o = {
    type = opts.type or "f32",
    op = opts.op or "sum",
    input = opts.input or 0,
    sig = opts.signal or 0,
    half = opts.half,
    fold = opts.fold,
    slot = chunk,
    inbytes = inbytes,
  }
  o.ack, o.ready, o.done = o.sig + 1, o.sig + 2, o.sig + 3
  o.scratch = opts.scratch or (o.input + inbytes)
  if not byopts then
    if nmade >= madeMax then made, nmade = {}, 0 end
    byopts = {}
    made[opts], nmade = byopts, nmade + 1
  end
  byopts[chunk] = o
  return o
end

local sizes = { f32 = 4, f64 = 8, f16 = 2, bf16 = 2, i32 = 4, i64 = 8, u32 = 4, u64 = 8,
  float = 4, double = 8, half = 2, int = 4, long = 8 }

--- esize is the size in bytes of an element of type t.
function M.esize(t)
  local s = sizes[t]
  if not s then error(("reduce: unknown element type %q"):format(tostring(t)), 2) end
  return s
end

local ops = { sum = true, prod = true, min = true, max = true, add = true, mul = true }

--- check raises, before the schedule what (its name: "reduce_scatter.ring")
--- enqueues anything, an error naming the first bad argument: n not a
--- whole, non-negative number of elements (of chunk: n is a chunk; of
--- input: n is a whole input, cut into chunks), opts.type or opts.op
--- unknown. level is the caller's level as error's (2: the caller's
--- caller is blamed).
function M.check(what, n, opts, level)
  local t, op = opts and opts.type or "f32", opts and opts.op or "sum"
  local msg
  if type(n) ~= "number" or n < 0 or n ~= math.floor(n) or n >= 2 ^ 53 then
    msg = ("bad argument 'n' (%s: want a whole number of bytes, 0 or more)"):format(tostring(n))
  elseif not sizes[t] then
    msg = ("bad argument 'opts.type' (unknown element type %q; want f32, f64, f16, bf16, i32, i64, u32 or u64)"):format(tostring(t))
  elseif not ops[op] then
    msg = ("bad argument 'opts.op' (unknown reduction op %q; want sum, prod, min or max)"):format(tostring(op))
  elseif n % sizes[t] ~= 0 then
    msg = ("bad argument 'n' (%d bytes is not a whole number of %d-byte %s elements)"):format(n, sizes[t], t)
  else
    return
  end
  -- (This interpreter's levels count one frame more than Lua 5.1's: 2
  -- is the function that calls error.)
  error(("rank %d: %s: %s"):format(lc.rank, what, msg), level + 2)
end

--- even returns the offsets and lengths (0-based tables) of size chunks
--- covering n bytes of esz-byte elements: the first n/esz % size chunks
--- hold one element more than the others. The tables are shared between
--- calls: callers must not change them.
local evens = {}

function M.even(n, esz)
  local size = lc.size
  local key = n * 16 + esz
  local e = evens[key]
  if e then return e[1], e[2], e[3] end
  if n % esz ~= 0 then
    error(("reduce: %d bytes is not a whole number of %d-byte elements"):format(n, esz), 2)
  end
  local elems = n / esz
  local base, rem = math.floor(elems / size), elems % size
  local offs, lens, most = {}, {}, 0
  for c = 0, size - 1 do
    offs[c] = (c * base + math.min(c, rem)) * esz
    lens[c] = (base + (c < rem and 1 or 0)) * esz
    most = math.max(most, lens[c])
  end
  evens[key] = { offs, lens, most }
  return offs, lens, most
end

--- ring_steps is the ring's size-1 steps over the chunks offs/lens of the
--- input: in step s a rank sends its partial of chunk (rank - s - 1) to
--- its right neighbour's scratch slot s % 2, waits for its left
--- neighbour's partial of chunk (rank - s - 2) and reduces it into its
--- own. Each reduction is acknowledged to the sender. Before a put the
--- sender waits until the right neighbour has reduced every earlier put
--- but the one just before (which went to the other slot); at step 0,
--- every earlier put, since the last step of the previous call may have
--- used the same slot. The slots and the waits are the same in every
--- call, so a plan of one call replays safely.
function M.ring_steps(w, offs, lens, o)
  local me, size = lc.rank, lc.size
  local right, left = (me + 1) % size, (me - 1) % size
  local data, out = M.rows(w, o.sig), M.rows(w, "rs_out")
  for s = 0, size - 2 do
    local c = (me - s - 1) % size
    local t = out[right]
    w:wait_signal_from(right, o.ack, ">=", s == 0 and t or t - 1)
    local slot = o.scratch + (s % 2) * o.slot
    w:put_signal(right, slot, w, o.input + offs[c], lens[c], o.sig, 1, "add")
    out[right] = t + 1
    local rc = (me - s - 2) % size
    data[left] = data[left] + 1
    w:wait_signal_from(left, o.sig, ">=", data[left])
    w:reduce(w, o.input + offs[rc], w, slot, lens[rc], o.type, o.op)
    if s == size - 2 then
      -- Every put of the call has read its source before the last
      -- acknowledgement, after which the left neighbour may write
      -- this rank's chunks (all_reduce's all-gather).
      w:flush()
    end
    w:signal(left, o.ack, "add", 1)
  end
end

--- meet signals every peer on slot and waits until every peer has
--- signalled it as often (this call's turn). A peer cannot be a meeting
--- ahead on the slot: it would need this rank's signal of the next one.
function M.meet(w, slot)
  local r, total = M.rows(w, slot), 0
  for p = 0, lc.size - 1 do
    if p ~= lc.rank then r[p] = r[p] + 1 end
    total = total + r[p]
  end
  w:signal_all(slot, "add", 1)
  w:wait_signal(slot, ">=", total)
end

--- Ring: size - 1 steps, each rank sending to its right neighbour.
function M.ring(w, n, opts)
  M.check("reduce_scatter.ring", n, opts, 2)
  local o = M.options(opts, n, lc.size * n)
  local offs, lens = {}, {}
  for c = 0, lc.size - 1 do offs[c], lens[c] = c * n, n end
  if lc.size > 1 then M.ring_steps(w, offs, lens, o) end
end

--- Direct (pull): once every rank's input is in place, each rank reduces
--- its chunk from every peer's window, peers in the order rank+1, rank+2,
--- ..., then waits until every rank is done reading.
function M.direct(w, n, opts)
  M.check("reduce_scatter.direct", n, opts, 2)
  local o = M.options(opts, n, lc.size * n)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  M.meet(w, o.ready)
  local at = o.input + me * n
  for i = 1, size - 1 do
    w:reduce_from((me + i) % size, at, w, at, n, o.type, o.op)
  end
  M.meet(w, o.done)
end

-- half[w] is the staging half the next staged call of a window uses (one
-- for every staged schedule of the window, reduce_scatter's and all_reduce's).
local half = setmetatable({}, { __mode = "k" })

--- stage returns this call's staging half (base offset) for slots of
-- slot bytes, one per rank, and flips the window's half. The halves are
-- opts.half bytes apart (default size * slot): calls of different sizes
-- either pass one opts.half for all (at least size times the largest slot)
-- or meet (lc.barrier) in between, else a peer's next call may write where
-- this rank still reads.
function M.stage(w, o, slot)
  if o.half and o.half < lc.size * slot then
    -- (Level 4: this interpreter's count for the schedule's caller.)
    error(("rank %d: bad argument 'opts.half' (%s bytes: the staging halves need %d each, %d slots of %d)"):format(
      lc.rank, tostring(o.half), lc.size * slot, lc.size, slot), 4)
  end
  local h = half[w] or 0
  half[w] = 1 - h
  return o.scratch + h * (o.half or lc.size * slot)
end

--- waits waits for one signal from every peer on the data slot, one wait
-- per sender (a peer that is a call ahead must not stand in for a slow
-- one in a sum).
function M.waits(w, o)
  local me, size, data = lc.rank, lc.size, M.rows(w, o.sig)
  for i = 1, size - 1 do
    local q = (me - i) % size
    data[q] = data[q] + 1
    w:wait_signal_from(q, o.sig, ">=", data[q])
  end
end

--- fold reduces the len bytes at off of every rank, in rank order 0..size-1,
--- into this rank's window at off: rank q's bytes are at at + q * slot of
--- the staging half, this rank's own at off. Rank 0 folds in place, and so
--- does rank 1 for sums and products (x1 + x0 has the bits of x0 + x1).
--- The others (the order must not start with their own) fold into tmp
--- first and copy the result back, flushed, so that the caller may put it
--- from off at once; or, on a GPU, they find their own bytes in their slot
--- of the staging half too (own, called before), copy rank 0's over their
--- own and reduce the rest into it: the plan interpreter runs that copy
--- and the reductions as one pass.
local commutes = { sum = true, add = true, prod = true, mul = true }
M.commutes = commutes

local function inplace(o)
  return lc.rank == 0 or (lc.rank == 1 and commutes[o.op])
end

-- gpu[w]: w's memory is a GPU's.
local gpu = setmetatable({}, { __mode = "k" })

local function staged(w, o)
  if inplace(o) then return false end
  if o.fold then return o.fold == "staged" end
  if gpu[w] == nil then gpu[w] = w:info().memory == "device" end
  return gpu[w]
end

--- own puts this rank's len bytes at off into its own slot of the staging
--- half (at + rank * slot) where fold reads them there: called before the
--- peers' data can land, it costs the caller no time on the way from
--- their signals to the result.
function M.own(w, o, off, len, at, slot)
  if staged(w, o) then w:put(lc.rank, at + lc.rank * slot, w, off, len) end
end

function M.fold(w, o, off, len, at, slot, tmp)
  local me, size = lc.rank, lc.size
  if inplace(o) then
    for q = me == 1 and 0 or 1, size - 1 do
      if q ~= me then w:reduce(w, off, w, at + q * slot, len, o.type, o.op) end
    end
  elseif staged(w, o) then
    w:flush() -- own's copy is out (free where no peer is over the network)
    w:put(me, off, w, at, len)
    w:flush()
    for q = 1, size - 1 do
      w:reduce(w, off, w, at + q * slot, len, o.type, o.op)
    end
  else
    w:put(me, tmp, w, at, len)
    w:flush() -- (free where no peer is over the network)
    for q = 1, size - 1 do
      w:reduce(w, tmp, w, q == me and off or at + q * slot, len, o.type, o.op)
    end
    w:put(me, off, w, tmp, len)
    w:flush()
  end
end

--- Push (small sizes): each rank puts chunk c of its input into rank c's
--- staging area and waits for its chunk from every peer, which it reduces
--- (ranks 0..size-1 in order) into its own: one one-way latency. The
--- staging areas alternate between two halves (scratch: 2 * size * n + n
--- bytes, halves opts.half apart, see stage): a peer can be at most one
--- call ahead, since finishing a call needs every rank's chunk of it,
--- which a rank sends only once its previous call is over.
function M.push(w, n, opts)
  M.check("reduce_scatter.push", n, opts, 2)
  local o = M.options(opts, n, lc.size * n)
  local me, size = lc.rank, lc.size
  if size == 1 then return end
  local at = M.stage(w, o, n)
  M.own(w, o, o.input + me * n, n, at, n)
  for i = 1, size - 1 do
    local c = (me + i) % size
    w:put_signal(c, at + me * n, w, o.input + c * n, n, o.sig, 1, "add")
  end
  M.waits(w, o)
  M.fold(w, o, o.input + me * n, n, at, n, o.scratch + 2 * (o.half or size * n))
  w:flush()
end

-- mapped[w]: every peer's part of w is mapped here (no network peer);
-- shared[w]: every peer's part is host shared memory (the host backend).
local mapped = setmetatable({}, { __mode = "k" })
local shared = setmetatable({}, { __mode = "k" })

local function look(w)
  local m, sh = true, w:info().memory == "host"
  for p = 0, lc.size - 1 do
    local t = w:transport(p)
    if t == "net" then m = false end
    if t ~= "shm" and t ~= "self" then sh = false end
  end
  mapped[w], shared[w] = m, sh
end

--- mapped_all reports whether this rank maps every peer's part of w, so
--- that reduce_from reads it directly.
function M.mapped_all(w)
  if mapped[w] == nil then look(w) end
  return mapped[w]
end

--- shared_all reports whether w is host memory and every peer's part of
--- it host shared memory here (the host backend): reading a peer there
--- costs what reading this rank's own memory does, once the data left the
--- writer's cache.
function M.shared_all(w)
  if shared[w] == nil then look(w) end
  return shared[w]
end

--- Auto: push up to opts.push_max bytes of input; above, direct where
--- every peer is mapped (each byte read once from its owner, in place),
--- else the ring (neighbours only over the network). push_max defaults
--- to 8 KiB where every peer is host shared memory and to 256 KiB
--- elsewhere: on the host, direct measured 2-20 x faster than push from
--- 16 KiB on 2 and 4 ranks, push faster at 1-4 KiB
--- (docs/results/reductions.md).
function M.auto(w, n, opts)
  M.check("reduce_scatter.auto", n, opts, 2)
  return M[M.pick(w, n, opts)](w, n, opts)
end

--- Pick: the name of the schedule auto runs for these arguments ("push",
--- "direct" or "ring"); it enqueues nothing.
function M.pick(w, n, opts)
  local most = opts and opts.push_max or (M.shared_all(w) and 8192 or 262144)
  if lc.size * n <= most then
    return "push"
  elseif M.mapped_all(w) then
    return "direct"
  end
  return "ring"
end

return M
