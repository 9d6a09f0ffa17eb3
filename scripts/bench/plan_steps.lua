-- plan_steps.lua: GPU time a replay of small step mixes in one launch of
-- many replays: puts of 1 KiB or 8 bytes to every peer, or as many to one
-- peer, with and without their waits; reductions, signals and puts alone.
-- bytes (default 1024) sets the size of the "1K" puts and reductions.
--   luacoll run -n N --device cuda bench/plan_steps.lua [replays] [mode] [bytes]
local lc = require("luacoll")
local R = tonumber(arg[1] or "2000")
local mode = arg[2] or "device"
local B = tonumber(arg[3] or "1024")
local gap = math.max(4096, B)
local K = B >= 1024 and math.floor(B / 1024) .. "K" or B .. "B"
local me, size = lc.rank, lc.size
local w = lc.window{ bytes = 4194304 }
local function timeit(p)
  p:run{ times = 10 }; w:sync()
  local best = 1e9
  for k = 1, 3 do
    lc.barrier()
    local t = lc.timer(); t:start(); p:run{ times = R }; w:sync(); t:stop()
    best = math.min(best, t:seconds() / R)
  end
  return best * 1e6
end
-- body: nput bytes to each of npeers peers (me+1, me+2, ...; with one,
-- npeers puts to me+1 alone, at different offsets), their waits, nred
-- reductions.
local function body(nput, npeers, nred, waits, one)
  return function(w)
    for i = 1, npeers do
      local to = one and (me + 1) % size or (me + i) % size
      w:put_signal(to, 65536 + (one and i or me) * gap, w, 0, nput, 0, 1, "add")
    end
    if waits and one then w:wait_signal_from((me - 1) % size, 0, ">=", npeers) end
    if waits and not one then for i = 1, npeers do w:wait_signal_from((me - i) % size, 0, ">=", 1) end end
    for i = 1, nred do w:reduce(w, 0, w, 65536 + ((me + i) % size) * gap, B, "f32", "sum") end
  end
end
local cases = {
  { "3 puts 1K + waits", B, size - 1, 0, true },
  { "3 puts 1K + waits + 3 reduces", B, size - 1, size - 1, true },
  { "3 puts 8B + waits", 8, size - 1, 0, true },
  { "3 puts 8B to one peer + wait", 8, size - 1, 0, true, true },
  { "1 put 8B + wait", 8, 1, 0, true },
  { "1 put 1K + wait", B, 1, 0, true },
  { "3 reduces only", B, 0, size - 1, false },
  { "3 puts 1K, no waits", B, size - 1, 0, false },
  { "3 puts 1K to one peer, no waits", B, size - 1, 0, false, true },
}
-- Signals alone and puts alone, to every peer.
local function signals(how)
  return function(w) for i = 1, size - 1 do w:signal((me + i) % size, 1, how, 1) end end
end
local function puts(w)
  for i = 1, size - 1 do w:put((me + i) % size, 65536 + me * gap, w, 0, B) end
end
-- Copies within the rank's own window: up to 256 bytes thread 0 makes
-- them alone, above every thread of the block.
local function copies(n)
  return function(w) for i = 1, 3 do w:put(me, 131072 + i * gap, w, 65536 + i * gap, n) end end
end
local extra = {
  { "3 signals (add), no waits", signals("add") },
  { "3 signals (set), no waits", signals("set") },
  { "3 puts 1K, no signals", puts },
  { "3 own copies 256B", copies(256) },
  { "3 own copies 512B", copies(512) },
}
for _, c in ipairs(cases) do c.f = body(c[2], c[3], c[4], c[5], c[6]) end
for _, c in ipairs(extra) do c.f = c[2]; cases[#cases + 1] = c end
for _, c in ipairs(cases) do
  local p = lc.plan(c.f, w, { mode = mode })
  local us = timeit(p)
  if me == 0 then print(("ranks=%d %-32s %.2f us/replay"):format(size, (c[1]:gsub("1K", K)), us)) end
  p:free()
end
