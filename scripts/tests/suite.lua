-- The window suite: the same checks on every backend.
--   luacoll run -n 2 tests/suite.lua            (host)
--   luacoll run -n 2 --device cuda tests/suite.lua
-- Prints "suite: N passed, M failed" on rank 0 and fails the run on any failure.
local lc = require("luacoll")
local me, size = lc.rank, lc.size
local right, left = (me + 1) % size, (me - 1 + size) % size
local passed, failed = 0, 0

local function check(name, f)
  local ok, err = pcall(f)
  -- every rank must agree before the next check starts
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

local function expect_error(f, needle)
  local ok, err = pcall(f)
  assert(not ok, "expected an error containing " .. needle)
  assert(tostring(err):find(needle, 1, true), ("error %q lacks %q"):format(tostring(err), needle))
end

local paths = { "auto" }
if lc.device() ~= "host" then paths = { "auto", "ce", "sm" } end

for _, path in ipairs(paths) do
  local w = lc.window{ bytes = 4 * 1024 * 1024, signals = 8, counters = 4, barriers = 4, timeout_ms = 5000, path = path }

  check(path .. ": put_signal ring, odd size and offsets", function()
    local n = 1000003 % 65536 + 7
    local src = lc.buffer(n + 13)
    src:fill("rand", 100 + me)
    w:put_signal(right, 5, src, 13, n, 0)
    w:wait_signal_from(left, 0, ">=", 1)
    w:sync()
    local ref = lc.buffer(n + 13); ref:fill("rand", 100 + left)
    assert(w:buffer():equal(ref, 5, 13, n), "data differs")
    assert(w:buffer():checksum(5, n) == ref:checksum(13, n), "checksums differ")
    ref:free(); src:free()
  end)

  check(path .. ": get", function()
    w:buffer():fill("iota", me * 7)
    w:barrier(0); w:sync()
    local dst = lc.buffer(64)
    w:get(right, 16, dst, 0, 64)
    w:sync()
    assert(dst:get_u32(0) == right * 7 + 4, "got " .. dst:get_u32(0))
    w:barrier(0); w:sync()
    dst:free()
  end)

  check(path .. ": signal add and set, read_signal", function()
    w:reset_signals(); w:barrier(1); w:sync()
    w:signal(right, 1, "set", 40)
    w:signal(right, 1, "add", 2)
    w:wait_signal_from(left, 1, "==", 42)
    w:signal_all(2, "add", 1)
    w:wait_signal(2, "==", size - 1)
    w:sync()
    assert(w:read_signal_from(left, 1) == 42)
    assert(w:read_signal(2) == size - 1)
    w:barrier(1); w:sync()
  end)

  check(path .. ": counters", function()
    local src = lc.buffer(256)
    for i = 1, 10 do w:put_counter(right, i * 256, src, 0, 256, 3, 2) end
    w:wait_counter(right, 3, ">=", 20)
    w:sync()
    assert(w:read_counter(right, 3) == 20)
    w:reset_counter(right, 3); w:sync()
    assert(w:read_counter(right, 3) == 0)
    w:put_signal_counter(right, 0, src, 0, 8, 4, 1, 2, 1)
    w:wait_signal_from(left, 4, ">=", 1)
    w:wait_counter(right, 2, "==", 1)
    w:sync()
    src:free()
    w:barrier(0); w:sync()
  end)

  check(path .. ": barriers are reusable", function()
    for i = 1, 50 do w:barrier(i % 4) end
    local partner = (me % 2 == 0) and me + 1 or me - 1   -- pairs (0,1), (2,3), ...
    if partner < size then
      for i = 1, 20 do w:barrier_peer(partner, 3) end
    end
    w:sync()
  end)

  check(path .. ": data before signal, many rounds", function()
    local src = lc.buffer(65536)
    for i = 1, 20 do
      src:fill("const", i)
      w:put_signal(right, 65536, src, 0, 65536, 6)
      w:wait_signal_from(left, 6, ">=", i)   -- slot 6 is used only here
      w:sync()
      local b = w:buffer():read(65536 + 65535, 1):byte()
      assert(b == i, ("round %d saw byte %d"):format(i, b))
      w:barrier(2); w:sync()
    end
    src:free()
  end)

  check(path .. ": a wait times out with a clear error and the window keeps working", function()
    local t = lc.window{ bytes = 64, timeout_ms = 200, path = path }
    t:wait_signal(7, ">=", 1)
    expect_error(function() t:sync() end, "timed out after 200ms")
    -- a wait on one peer's row (a stream memory operation on CUDA paths ce/auto)
    t:wait_signal_from(left, 6, ">=", 3)
    expect_error(function() t:sync() end, "last value seen 0")
    t:signal(right, 0)
    t:wait_signal(0, "==", 1)
    t:sync()
    t:free()
  end)

  check(path .. ": bad input is refused and names the argument", function()
    local b = lc.buffer(64)
    expect_error(function() w:put(size, 0, b, 0, 8) end, "'peer'")
    expect_error(function() w:put(0, 4 * 1024 * 1024, b, 0, 8) end, "'n'")
    expect_error(function() w:put(0, 0, b, 60, 8) end, "'n'")
    expect_error(function() w:signal(0, 8) end, "'sig'")
    expect_error(function() w:wait_signal(0, "=>", 1) end, "'cmp'")
    expect_error(function() w:barrier(4) end, "'id'")
    expect_error(function() w:put(0, 2^53 + 2, b, 0, 8) end, "2^53")
    b:free()
    expect_error(function() w:put(0, 0, b, 0, 8) end, "freed")
    w:sync()
  end)

  check(path .. ": ring, direct and hier all-gather from the library", function()
    local ag = require("allgather")
    local n = 12345
    local g = lc.window{ bytes = n * size, path = path }
    for iter = 1, 4 do
      local src = lc.buffer(n); src:fill("rand", iter * 1000 + me)
      if iter == 1 then ag.direct(g, src, 0, n)
      elseif iter == 2 then ag.ring(g, src, 0, n)
      elseif iter == 3 then ag.hier(g, src, 0, n)
      else ag.hier(g, src, 0, n, { nodes = size % 2 == 0 and 2 or 1, pieces = 3 }) end
      g:sync()
      for r = 0, size - 1 do
        local ref = lc.buffer(n); ref:fill("rand", iter * 1000 + r)
        assert(g:buffer():equal(ref, r * n, 0, n), ("iter %d chunk %d"):format(iter, r))
        ref:free()
      end
      src:free()
    end
    g:free()
  end)

  check(path .. ": large put", function()
    local n = 4 * 1024 * 1024
    local src = lc.buffer(n); src:fill("rand", 9 + me)
    w:put_signal(right, 0, src, 0, n, 7)
    w:wait_signal_from(left, 7, ">=", 1)
    w:sync()
    local ref = lc.buffer(n); ref:fill("rand", 9 + left)
    assert(w:buffer():equal(ref), "4 MiB put differs")
    src:free(); ref:free()
    w:barrier(0); w:sync()
  end)

  w:free()
end

lc.barrier()
if me == 0 then print(("suite: %d passed, %d failed"):format(passed, failed)) end
if failed > 0 then error(("%d checks failed"):format(failed)) end
