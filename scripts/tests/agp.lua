-- Persistent all-gather checks, on any backend:
--   luacoll run -n 2 tests/agp.lua            (host)
--   luacoll run -n 2 --device cuda tests/agp.lua [replays [path]]
-- Odd sizes, in place and out of place, changing data every exec, every
-- chunk checked, over-capacity refused, sizes changing from exec to exec
-- on one all-gather, and (on CUDA) graph replays. path is the windows'
-- path (auto, ce or sm); algo forces an algorithm (auto, direct, ring,
-- hier), and on the host every algorithm also follows the others on one
-- window.
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local replays = tonumber(arg[1] or "1000")
local path = arg[2]
local algo = arg[3]   -- auto (nil), direct, ring or hier
local passed = 0
-- networked: peers are reached over the network (logical nodes, --nodes);
-- on CUDA the host then runs the network operations (the proxy path) and
-- the all-gather runs on window operations (in graph mode, from a host
-- function the graph replays), so every algorithm works there.
local networked
do
  local probe = lc.window{ bytes = 8 }
  networked = false
  for p = 0, size - 1 do
    if probe:transport(p) == "net" then networked = true end
  end
  local want = lc.device() == "host" and "host" or (networked and "host, mapped by the device" or "device")
  assert(probe:info().memory == want, ("window memory %q, want %q"):format(probe:info().memory, want))
  probe:free()
end

local function check_all(w, n, seed)
  for r = 0, size - 1 do
    local ref = lc.buffer(n)
    ref:fill("rand", seed * 1000 + r)
    assert(w:buffer():equal(ref, r * n, 0, n), ("rank %d: chunk %d differs (n=%d, seed %d)"):format(me, r, n, seed))
    ref:free()
  end
end

for _, n in ipairs({ 1000003, 1, 4097, 65536 }) do
  local w = lc.window{ bytes = n * size + 64, path = path }
  local ag = lc.allgather_persistent{ window = w, algo = algo }
  if algo and algo ~= "auto" and lc.device() == "host" then
    assert(ag:info().algo == algo, ("algo %s requested, %s runs"):format(algo, tostring(ag:info().algo)))
  end
  local src = lc.buffer(n + 5)
  for it = 1, 5 do
    local seed = n % 997 + it
    if it % 2 == 1 then
      -- out of place, from an odd source offset
      local tmp = lc.buffer(n); tmp:fill("rand", seed * 1000 + me)
      src:write(5, tmp:read(0, n)); tmp:free()
      ag:exec(src, 5, n)
    else
      -- in place: the own chunk is already at rank * n
      local tmp = lc.buffer(n); tmp:fill("rand", seed * 1000 + me)
      w:put(me, me * n, tmp, 0, n); w:sync(); tmp:free()
      ag:exec(w, me * n, n)
    end
    lc.sync()
    check_all(w, n, seed)
  end
  -- n * size past the window is refused, naming n, and nothing breaks
  local ok, err = pcall(function() ag:exec(src, 0, n + 64) end)
  assert(not ok and err:find("'n'", 1, true), "over-capacity exec: " .. tostring(err))
  ag:destroy()
  local ok2, err2 = pcall(function() ag:exec(src, 0, n) end)
  assert(not ok2 and tostring(err2):find("destroy", 1, true), "exec after destroy: " .. tostring(err2))
  src:free(); w:free()
  passed = passed + 1
end

do
  -- one all-gather, n changing from exec to exec (on CUDA path "sm" this
  -- crosses between the flagged-line and the one-kernel execs)
  local sizes = { 70000, 16, 65536, 1000, 65537, 3, 300000, 8 }
  local max = 0
  for _, n in ipairs(sizes) do max = math.max(max, n) end
  local w = lc.window{ bytes = max * size, path = path }
  local ag = lc.allgather_persistent{ window = w, algo = algo }
  local src = lc.buffer(max)
  for round = 1, 3 do
    for i, n in ipairs(sizes) do
      local seed = round * 100 + i
      src:fill("rand", seed * 1000 + me)
      ag:exec(src, 0, n)
      lc.sync()
      check_all(w, n, seed)
    end
  end
  ag:destroy(); src:free(); w:free()
  passed = passed + 1
end

do
  -- execs back to back with nothing between them on the stream (on CUDA
  -- the done kernel of one and the ready kernel of the next share a
  -- launch), then a sync: the last exec's data is everywhere
  local n = 2 * 1048576 + 3
  local w = lc.window{ bytes = n * size, path = path }
  local ag = lc.allgather_persistent{ window = w, algo = algo }
  local srcs = {}
  for k = 1, 3 do
    srcs[k] = lc.buffer(n)
    srcs[k]:fill("rand", (500 + k) * 1000 + me)
  end
  lc.sync()
  for round = 1, 4 do
    for k = 1, 3 do ag:exec(srcs[k], 0, n) end
    lc.sync()
    check_all(w, n, 503)
  end
  local execs = ag:info().execs
  assert(execs == nil or tonumber(execs) == 12, "execs counted: " .. tostring(execs))
  ag:destroy()
  for k = 1, 3 do srcs[k]:free() end
  w:free()
  passed = passed + 1
end

if lc.device() == "host" or networked then
  -- the algorithms one after another on one window: each finds the exec
  -- count the one before left in the slots, sizes change, data checked
  local n = 300007
  local w = lc.window{ bytes = n * size }
  local src = lc.buffer(n)
  local seed = 900
  for _, a in ipairs({ "direct", "ring", "hier", "auto", "ring", "direct", "hier" }) do
    local ag = lc.allgather_persistent{ window = w, algo = a }
    for _, m in ipairs({ n, 5, 0, 70001 }) do
      seed = seed + 1
      src:fill("rand", seed * 1000 + me)
      ag:exec(src, 0, m)
      lc.sync()
      check_all(w, m, seed)
    end
    ag:destroy()
  end
  src:free(); w:free()
  passed = passed + 1
end

if lc.device() ~= "host" then
  -- graph mode: the first exec is captured, later execs replay it
  local n = 4096
  local w = lc.window{ bytes = n * size, path = path }
  local ag = lc.allgather_persistent{ window = w, graph = true }
  local src = lc.buffer(n)
  -- every replay with new data, every chunk checked after it
  for it = 1, replays do
    src:fill("rand", it * 1000 + me)
    ag:exec(src, 0, n)
    lc.sync()
    check_all(w, n, it)
  end
  -- then a burst of 100 replays back to back (the cross-iteration guard
  -- with nothing between them), the last one's data checked
  for it = replays + 1, replays + 100 do
    src:fill("rand", it * 1000 + me)
    ag:exec(src, 0, n)
  end
  lc.sync()
  check_all(w, n, replays + 100)
  local info = ag:info()
  assert(info.graph == true, "graph mode is " .. tostring(info.graph))
  if me == 0 then lc.log("graph nodes per exec: %s, %d replays each checked, then 100 back to back", tostring(info.graph_nodes), replays) end
  ag:destroy(); src:free(); w:free()
  passed = passed + 1
end

lc.barrier()
if me == 0 then print(("agp: %d passed, 0 failed"):format(passed)) end
