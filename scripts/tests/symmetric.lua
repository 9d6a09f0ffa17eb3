-- Symmetric windows: every rank's part in one flat range (CUDA), side by
-- side with asymmetric ones; on the host backend the option is accepted
-- and the windows say why they are not symmetric.
--   luacoll run -n 2|3|4 --device cuda tests/symmetric.lua        (expects symmetric where asked)
--   luacoll run -n 2 --device cuda --ipc legacy tests/symmetric.lua fallback
--   luacoll run -n 2 tests/symmetric.lua                          (host)
-- Prints "symmetric: N passed, M failed" on rank 0 and fails the run on any failure.
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local right, left = (me + 1) % size, (me - 1 + size) % size
local gpu = lc.device() ~= "host"
local fallback = arg[1] == "fallback"
local passed, failed = 0, 0

local function check(name, f)
  local ok, err = pcall(f)
  local all = lc.allgather(ok and "" or tostring(err))
  local bad = {}
  for r = 1, size do if all[r] ~= "" then bad[#bad + 1] = ("rank %d: %s"):format(r - 1, all[r]) end end
  if #bad == 0 then
    passed = passed + 1
  else
    failed = failed + 1
    if me == 0 then lc.log("FAIL %s\n  %s", name, table.concat(bad, "\n  ")) end
  end
end

-- exercise moves data, signals, counters and barriers through w.
local function exercise(w, n, seed)
  local src = lc.buffer(n)
  src:fill("rand", seed + me)
  w:put_signal_counter(right, 0, src, 0, n, 1, 1, 0, 1)
  w:wait_signal_from(left, 1, ">=", 1)
  w:wait_counter(right, 0, ">=", 1)
  w:barrier(2)
  w:sync()
  local ref = lc.buffer(n); ref:fill("rand", seed + left)
  assert(w:buffer():equal(ref, 0, 0, n), "data from the left differs")
  -- every rank reads every peer's part (get) after a barrier
  for p = 0, size - 1 do
    local dst = lc.buffer(8)
    w:get(p, 0, dst, 0, 8)
    w:sync()
    local want = lc.buffer(8); want:fill("rand", seed + (p - 1 + size) % size)
    assert(dst:equal(want, 0, 0, 8), "get from rank " .. p .. " differs")
    dst:free(); want:free()
  end
  w:barrier(3); w:sync()
  ref:free(); src:free()
end

-- The size is not a multiple of the 2 MiB granularity.
local bytes = 1000003
local sym = lc.window{ bytes = bytes, symmetric = fallback and "auto" or true, timeout_ms = 10000 }
local asym = lc.window{ bytes = 4096, symmetric = false, timeout_ms = 10000 }
local auto = lc.window{ bytes = 65536, timeout_ms = 10000 }

check("info of a window asked to be symmetric", function()
  local i = sym:info()
  assert(i.bytes == bytes, "bytes " .. tostring(i.bytes))
  assert(type(i.why) == "string" and i.why ~= "", "no reason given")
  if gpu and not fallback then
    assert(i.mode == "symmetric", "mode " .. i.mode .. ": " .. i.why)
    assert(i.granularity > 0 and i.stride % i.granularity == 0, "stride " .. i.stride .. " granularity " .. i.granularity)
    assert(i.stride >= bytes, "stride " .. i.stride)
    assert(i.base > 0, "base " .. i.base)
  else
    assert(i.mode == "asymmetric", "mode " .. i.mode)
    assert(i.base == nil, "an asymmetric window has a base")
  end
end)

check("a symmetric window's base and stride agree on every rank", function()
  local i = sym:info()
  local all = lc.allgather(tostring(i.stride))
  for r = 1, size do assert(all[r] == all[1], "strides differ: " .. table.concat(all, ",")) end
end)

check("info of an asymmetric and an auto window", function()
  local i = asym:info()
  assert(i.mode == "asymmetric", "mode " .. i.mode)
  if gpu then assert(i.why:find("symmetric = false", 1, true), "why " .. i.why) end
  local a = auto:info()
  if gpu and not fallback then
    assert(a.mode == "symmetric", "auto gave " .. a.mode .. ": " .. a.why)
  else
    assert(a.mode == "asymmetric", "auto gave " .. a.mode)
    if fallback then assert(a.why:find("legacy", 1, true), "why " .. a.why) end
  end
end)

check("data, signals, counters and barriers through the symmetric window", function()
  exercise(sym, 777777, 10)
end)

check("the same through the asymmetric window, mixed in one script", function()
  exercise(asym, 4096, 20)
end)

check("and through both again, interleaved", function()
  exercise(sym, 4096, 30)
  exercise(asym, 1000, 40)
  exercise(auto, 65536, 50)
end)

check("symmetric = 'yes' is refused naming the argument", function()
  local ok, err = pcall(lc.window, { bytes = 8, symmetric = "yes" })
  assert(not ok and tostring(err):find("bad argument 'symmetric'", 1, true), tostring(err))
end)

check("create and free 100 symmetric windows", function()
  for i = 1, 100 do
    local w = lc.window{ bytes = 4096 + i, symmetric = gpu and not fallback }
    if i % 25 == 0 then exercise(w, 1024, 60 + i) end
    w:free()
  end
end)

sym:free(); asym:free(); auto:free()
if me == 0 then lc.log("symmetric: %d passed, %d failed", passed, failed) end
if failed > 0 then error("symmetric: " .. failed .. " failed") end
