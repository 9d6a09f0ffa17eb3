-- What p:verify says of every reduce-scatter and all-reduce schedule of
-- lib/reduce_scatter.lua and lib/all_reduce.lua, recorded as a plan and
-- replayed back to back, each call's result proved:
--   luacoll run -n 4 tests/reduce_verify.lua [replays] [n]
-- (replays default 3; n, the schedule's n, default 64 * lc.size bytes of
-- f32). The staged schedules (push, one_shot, two_shot) alternate between
-- two staging halves, so their plan records two calls (calls = 2), as
-- does auto (which picks them at small sizes); they are checked with each
-- fold (opts.fold "staged" and "tmp") too. Rank 0 prints a line per
-- schedule: the verdict (with the first problem, if any); any problem fails
-- the run.
local lc = require("luacoll")
local rs, ar = require("reduce_scatter"), require("all_reduce")
local replays = tonumber(arg and arg[1]) or 3
local n = tonumber(arg and arg[2]) or 64 * lc.size
local two = { push = true, one_shot = true, two_shot = true, auto = true }
local w = lc.window{ bytes = 4 * lc.size * lc.size * n + 64 }
local bad = 0
local function check(coll, mod, algo, fold)
  local calls = two[algo] and 2 or 1
  local opts = fold and { fold = fold } or nil
  local p = lc.plan(function(w)
    for _ = 1, calls do mod[algo](w, n, opts) end
  end, w)
  local rep = p:verify{ collective = coll, window = w, n = n, replays = replays, calls = calls }
  if lc.rank == 0 then
    print(("%-15s %-16s ranks %d  calls %d  replays %d  %s"):format(coll, algo .. (fold and " " .. fold or ""), lc.size, calls,
      replays, rep.summary))
  end
  if not rep.ok then bad = bad + 1 end
  p:free()
  w:sync()
  lc.barrier()
end
for _, algo in ipairs({ "ring", "direct", "push", "auto" }) do check("reduce_scatter", rs, algo) end
for _, algo in ipairs({ "ring", "one_shot", "two_shot", "one_shot_pull", "two_shot_pull", "auto" }) do
  check("allreduce", ar, algo)
end
-- Both folds of the staged schedules, whatever the window's memory.
for _, fold in ipairs({ "staged", "tmp" }) do
  check("reduce_scatter", rs, "push", fold)
  check("allreduce", ar, "one_shot", fold)
  check("allreduce", ar, "two_shot", fold)
end
assert(bad == 0, ("%d schedules fail verification"):format(bad))
