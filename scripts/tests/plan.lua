-- Plans (lc.plan) of the library schedules, on any backend:
--   luacoll run -n 4 tests/plan.lua                  (host)
--   luacoll run -n 2 --device cuda tests/plan.lua [replays [path [mode]]]
-- mode ("auto" by default; on CUDA "stream", "device" or "graph") is lc.plan's.
-- ring and direct from lib/allgather.lua, recorded once per size (odd
-- sizes, an odd source offset), verified as all-gathers, then replayed
-- with new data every replay and every chunk checked, then 100 replays
-- back to back with the last one's data checked. Two plans share one
-- window, as in bench allgather --plan, so their signal counts must stay
-- consistent across plans.
local lc = require("luacoll")
local ag = require("allgather")
local me, size = lc.rank, lc.size
local replays = tonumber(arg[1] or "1000")
local path = arg[2]
if path == "" or path == "-" then path = nil end
local mode = arg[3]
local passed = 0

local function check_all(w, n, seed)
  for r = 0, size - 1 do
    local ref = lc.buffer(n + 3)
    ref:fill("rand", seed * 1000 + r)
    assert(w:buffer():equal(ref, r * n, 3, n), ("rank %d: chunk %d differs (n=%d, seed %d)"):format(me, r, n, seed))
    ref:free()
  end
end

local most = 65539
local w = lc.window{ bytes = most * size, path = path }
for _, n in ipairs({ 1, 4097, most }) do
  local src = lc.buffer(n + 3)
  for _, algo in ipairs({ "ring", "direct" }) do
    local p = lc.plan(ag[algo], w, src, 3, n, { mode = mode or "auto" })
    local rep = p:verify{ collective = "allgather", window = w, n = n, src = src, src_off = 3 }
    assert(rep.ok, rep.summary)
    local info = p:info()
    assert(mode == nil or mode == "auto" or info.mode == mode, ("mode %s, asked for %s"):format(info.mode, tostring(mode)))
    -- The interpreter's block, where one runs it: a multiple of 32 from 128 to 512, never on the host.
    local th = info.threads
    assert(th == nil or (info.mode ~= "host" and th % 32 == 0 and th >= 128 and th <= 512),
      ("mode %s: threads %s"):format(info.mode, tostring(th)))
    for it = 1, replays do
      src:fill("rand", it * 1000 + me)
      p:run()
      lc.sync()
      check_all(w, n, it)
    end
    for it = replays + 1, replays + 100 do
      src:fill("rand", it * 1000 + me)
      p:run()
    end
    lc.sync()
    check_all(w, n, replays + 100)
    if me == 0 then
      lc.log("%s n=%d: mode %s%s, %d ops, %d steps, %d lines; %d replays each checked, then 100 back to back", algo, n, info.mode,
        (info.graph_nodes or info.launches) and (" (" .. (info.graph_nodes or info.launches) .. ")") or "", info.ops, rep.steps,
        info.lines, replays)
    end
    p:free()
    passed = passed + 1
  end
  src:free()
end
w:free()
lc.barrier()
if me == 0 then print(("plan: %d passed, 0 failed"):format(passed)) end
