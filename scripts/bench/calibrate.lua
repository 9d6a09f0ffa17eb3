-- What luacoll calibrate measures, as plans replayed in each mode (the
-- costs p:estimate predicts with are those of replays): the replay of a
-- plan that only flushes (a replay's fixed cost), of ops 8-byte puts to
-- the rank itself (the slope: what one op costs beyond its bytes), in host
-- mode of ops flushes (what a flush with nothing in flight costs), and,
-- between ranks 0 and 1, an 8-byte put_signal -> wait ping-pong of hops
-- round trips, puts of each size from both ranks at once (as in a
-- collective) and to the rank itself (up to 16 of a size a plan), then
-- flushed; per size too, in host mode, exchanges (moved: each rank puts and signals,
-- waits for the other's bytes and copies them to another place of its
-- window, so the copy reads what the other rank's processor wrote; own:
-- the same, the copy from the rank's own buffer); and
-- bars window barriers over every rank.
--   luacoll run -n 2 bench/calibrate.lua [modes] [sizes] [replays] [rounds] [graph_inline]
-- modes and sizes are comma-separated; graph_inline (default 256) is the
-- largest put graph mode keeps in its interpreter's node (larger ones are
-- a put kernel's node each, so their plans hold one put: the boundary
-- between the nodes is the put's, as in a collective's exec). Each time is the median of rounds
-- timings of replays replays back to back; moved is the median of at least
-- 21 rounds, and own moved less the median of the two exchanges'
-- differences, timed in the same rounds (pair); the empty replay is
-- timed first and last and the lower kept. Returns the times of one
-- replay in nanoseconds as lines "mode what count ns" (what: empty 1,
-- ops K, flushes K, hop K, put BYTES, self BYTES, moved BYTES, own BYTES,
-- hopn BYTES (a ping-pong's hop of a put_signal of BYTES), swap BYTES
-- (over the network: both ranks' put_signals of BYTES at once, then the
-- wait for the other's), barrier K; in
-- modes other than host, one 1 is the replay of a one-op plan and call 1
-- what a p:run of one such replay costs beyond that replay run among
-- many; in graph mode, lead K 1 says the put and self plans began with K
-- 8-byte puts to the rank itself; putk BYTES K says the put, self, moved
-- and own plans of BYTES held K puts).
--   luacoll run -n 4 bench/calibrate.lua host - [replays] [rounds] switch CPUS
-- is for ranks that outnumber the CPUS processors they share (the i-th
-- rank on processor i mod CPUS; ranks a multiple of 2 x CPUS), all ranks
-- at once, K steps of an 8-byte put_signal, then a wait for a signal:
-- "host same K ns", each rank with a partner on its own processor (every
-- step passes the processor to the partner), and "host ring K ns", to the
-- next rank from the one before, as a ring all-gather's steps.
local lc = require("luacoll")
local timing = require("timing")
local modes, sizes = {}, {}
for m in (arg[1] or "host"):gmatch("[%a]+") do modes[#modes + 1] = m end
for s in (arg[2] or "4096,65536,1048576,16777216"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(s) end
local replays = tonumber(arg[3] or "20")
local rounds = tonumber(arg[4] or "5")
-- the class between ranks 0 and 1 ("net": the exchanges below too)
local class = arg[5]
assert(lc.size >= 2, "calibrate needs 2 ranks or more")
local most = 8
for _, n in ipairs(sizes) do most = math.max(most, n) end
local w = lc.window{ bytes = 2 * most, signals = 2 }
local src = lc.buffer(most)
-- Real data: pages never written read as the zero page, from the cache.
src:fill("rand", lc.rank)
local me, peer = lc.rank, 1 - lc.rank
local out = {}

-- timed is rank 0's time of one replay of plan p, in nanoseconds, from
-- one timing of times replays (timing.once).
local function timed(p, times, calls)
  return timing.once(w, p, times, calls) * 1e9
end

-- per returns the time of one replay of body's plan, in nanoseconds: the
-- median over rounds of such timings.
local function per(mode, body, times, calls)
  local p = lc.plan(body, w, src, { mode = mode })
  local v = timing.median(w, p, times, rounds, calls) * 1e9
  p:free()
  return v
end

-- pair times the plans of bodies a and b in the same rounds (at least
-- pairRounds), one after the other: it returns the median of a's times
-- and the median of the rounds' differences a - b, in nanoseconds a
-- replay (times replays a round). A difference of two plans whose times
-- drift together with the machine's load (another job on the CPUs, the
-- memory bus) is steadier taken round by round than as the difference of
-- their own medians; with 5-7 rounds its median was at times nothing at
-- all, with 21 or more it held (docs/results/cost-model.md).
local pairRounds = 21
local function pair(mode, a, b, times)
  local rounds = math.max(rounds, pairRounds)
  local pa = lc.plan(a, w, src, { mode = mode })
  local pb = lc.plan(b, w, src, { mode = mode })
  pa:run{ times = 3 }
  pb:run{ times = 3 }
  w:sync()
  local ta, diff = {}, {}
  for k = 1, rounds do
    local got = {}
    -- a first in odd rounds, b first in even ones: what one leaves behind
    -- for the other (the caches' state) does not favour either.
    local order = k % 2 == 1 and { 1, 2 } or { 2, 1 }
    for _, i in ipairs(order) do
      got[i] = timed(i == 1 and pa or pb, times)
    end
    ta[k], diff[k] = got[1], got[1] - got[2]
  end
  pa:free()
  pb:free()
  table.sort(ta)
  table.sort(diff)
  local mid = math.floor((rounds + 1) / 2)
  return ta[mid], diff[mid]
end

-- steps is the plan of k steps: put_signal to rank to, then wait for
-- the signal from rank from.
local function steps(to, from, k)
  return function(w, src)
    for i = 1, k do
      w:put_signal(to, 0, src, 0, 8, 0, 1, "add")
      w:wait_signal_from(from, 0, ">=", i)
    end
    w:flush()
  end
end

if arg[5] == "switch" then
  local cpus, k = tonumber(arg[6]), 50 -- switchSteps in cmd_calibrate.go
  assert(cpus and cpus >= 2 and lc.size % (2 * cpus) == 0,
    ("calibrate switch: %d ranks on %s CPUs: want 2 CPUs or more and ranks a multiple of twice the CPUs"):format(lc.size, tostring(arg[6])))
  local same = me % (2 * cpus) < cpus and me + cpus or me - cpus
  local right, left = (me + 1) % lc.size, (me - 1 + lc.size) % lc.size
  out[1] = ("host same %d %.3f"):format(k, per("host", steps(same, same, k), replays))
  out[2] = ("host ring %d %.3f"):format(k, per("host", steps(right, left, k), replays))
  return table.concat(out, "\n")
end

local hops, ops, bars = 50, 64, 20
local xsig = 0 -- signals the moved plans' bodies counted on slot 1
local hsig = 0 -- and the ping-pongs' on slot 0

-- pingpong is the plan body of k round trips between ranks 0 and 1 of a
-- put_signal of n bytes and the wait for it (the other ranks look on).
-- A plan's waits count on from the signals every plan made before it
-- recorded (hsig): a body counting from 1 again would find its waits met
-- by the earlier plans' signals and measure no round trip at all.
local function pingpong(n, k)
  local first = hsig
  hsig = hsig + k
  return function(w, src)
    if me > 1 then w:flush() return end
    for i = 1, k do
      if me == 0 then
        w:put_signal(peer, 0, src, 0, n, 0, 1, "add")
        w:wait_signal_from(peer, 0, ">=", first + i)
      else
        w:wait_signal_from(peer, 0, ">=", first + i)
        w:put_signal(peer, 0, src, 0, n, 0, 1, "add")
      end
    end
    w:flush()
  end
end
for _, mode in ipairs(modes) do
  -- The empty replay is timed first and again last, and the lower taken:
  -- every other figure is read beyond it, and a stall of the machine
  -- (another job on the CPUs) during one of them would sink them all.
  local function flushOnly(w) w:flush() end
  local empty = per(mode, flushOnly, replays)
  -- Lines of k ops a plan, given as the replay of one (the empty replay
  -- and a k-th of the rest), written once the empty replay is known.
  local perOne = {}
  local many = per(mode, function(w, src)
    for _ = 1, ops do w:put(me, 0, src, 0, 8) end
    w:flush()
  end, replays)
  out[#out + 1] = ("%s ops %d %.3f"):format(mode, ops, many)
  -- A host replay runs its ops as it issues them: its flushes find
  -- nothing in flight (a GPU stream's may not).
  local host = mode == "host"
  if not host then
    -- What a call of one replay adds to the replay where replays are
    -- launched: a plan of one op, called once a replay, against the
    -- same replayed in one call.
    local function one(w, src) w:put(me, 0, src, 0, 8); w:flush() end
    local batch = per(mode, one, replays)
    local called = per(mode, one, replays, true)
    out[#out + 1] = ("%s call 1 %.3f"):format(mode, math.max(called - batch, 0.001))
    -- The empty plan launches nothing in these modes: the fixed cost of a
    -- replay (a graph's launch) is read from this plan of one op instead.
    out[#out + 1] = ("%s one 1 %.3f"):format(mode, batch)
  end
  if host then
    local flushes = per(mode, function(w)
      for _ = 1, ops do w:flush() end
    end, replays)
    out[#out + 1] = ("%s flushes %d %.3f"):format(mode, ops, flushes)
  end
  -- In graph mode a put larger than the interpreter keeps is a kernel
  -- node of its own, and a plan of such puts has no interpreter node: its
  -- put node would stand in for the one-op plan's interpreter node, and
  -- its own cost vanish from the difference. The put plans there begin
  -- with an 8-byte put to the rank itself (lead ... 1: how many such ops,
  -- which luacoll calibrate takes out again).
  local leads = mode == "graph" and 1 or 0
  local function lead(w, src)
    for _ = 1, leads do w:put(me, 0, src, 0, 8) end
  end
  if leads > 0 then out[#out + 1] = ("%s lead %d 1"):format(mode, leads) end
  local hop = per(mode, pingpong(8, hops), replays)
  out[#out + 1] = ("%s hop %d %.3f"):format(mode, hops, hop)
  for _, n in ipairs(sizes) do
    -- Small puts k at a time (up to 64 KiB a plan), so that one stands
    -- out of the replay's own time; the line gives the replay of one:
    -- the empty replay and a k-th of the rest.
    -- (the putk line tells luacoll calibrate the k.)
    local k = math.max(1, math.min(16, math.floor(65536 / n)))
    out[#out + 1] = ("%s putk %d %d"):format(mode, n, k)
    local put = per(mode, function(w, src)
      lead(w, src)
      for _ = 1, k do
        if me <= 1 then w:put(peer, me * most, src, 0, n) end
      end
      w:flush()
    end, replays)
    local self = per(mode, function(w, src)
      lead(w, src)
      for _ = 1, k do w:put(me, (me % 2) * most, src, 0, n) end
      w:flush()
    end, replays)
    -- The bytes a peer wrote, copied into place, as a collective's ranks
    -- do: k times (as the puts above), each rank puts n bytes into the
    -- other's window and signals, waits for the other's, and copies what
    -- came to another place (moved); the same with the copy from its own
    -- buffer instead (own). Both have the same ops and the same waits
    -- for the other rank: the difference is what reading bytes another
    -- processor wrote adds (host mode: CPU caches). Lines give one
    -- exchange's time, as above.
    -- (from nil: no copy, count exchanges a plan.)
    local function exchange(from, from_off, count)
      local first = xsig + 1
      xsig = xsig + count
      return function(w, src)
        if me <= 1 then
          for i = 0, count - 1 do
            w:put_signal(peer, me * most, src, 0, n, 1, 1, "add")
            w:wait_signal_from(peer, 1, ">=", first + i)
            if from then w:put(me, me * most, from == "w" and w or src, from_off, n) end
          end
        end
        w:flush()
      end
    end
    -- A put_signal of n bytes as a collective uses it: the signal after
    -- the bytes, and the other rank's wait for it before its answer (kh
    -- round trips a plan; luacoll calibrate's calHopsPer is the same kh):
    -- what a put_signal costs beyond the put (a release of the bytes
    -- before the signal, lines) grows with n.
    local kh = math.max(2, math.min(16, math.floor(1048576 / n)))
    local hopn = per(mode, pingpong(n, kh), replays)
    perOne[#perOne + 1] = { "hopn", n, hopn, 2 * kh }
    if class == "net" then
      -- Over the network a collective's step has both ranks' put_signals
      -- crossing at once, which a ping-pong's one way at a time does not
      -- show (the proxies and the sockets busy both ways): kh such
      -- exchanges a plan (swap), what the signal is read from there.
      local swap = per(mode, exchange(nil, nil, kh), replays)
      perOne[#perOne + 1] = { "swap", n, swap, kh }
    end
    perOne[#perOne + 1] = { "put", n, put, k }
    perOne[#perOne + 1] = { "self", n, self, k }
    if host then
      -- In the same rounds, their difference round by round (pair). The
      -- bodies are made in this order on every rank (each counts on the
      -- signals of the one before: xsig).
      local movedBody = exchange("w", peer * most, k)
      local ownBody = exchange("src", 0, k)
      local moved, diff = pair(mode, movedBody, ownBody, replays)
      local own = moved - diff
      perOne[#perOne + 1] = { "moved", n, moved, k }
      perOne[#perOne + 1] = { "own", n, own, k }
    end
  end
  local bar = per(mode, function(w)
    for _ = 1, bars do w:barrier(0) end
    w:flush()
  end, replays)
  out[#out + 1] = ("%s barrier %d %.3f"):format(mode, bars, bar)
  empty = math.min(empty, per(mode, flushOnly, replays))
  out[#out + 1] = ("%s empty 1 %.3f"):format(mode, empty)
  for _, l in ipairs(perOne) do
    local what, n, t, k = l[1], l[2], l[3], l[4]
    out[#out + 1] = ("%s %s %d %.3f"):format(mode, what, n, empty + (t - empty) / k)
  end
end
return table.concat(out, "\n")
