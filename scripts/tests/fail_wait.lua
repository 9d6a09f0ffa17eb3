-- Fault check: rank 1 raises while the others wait on a signal nobody
-- sends; every rank must stop at once with an error naming rank 1.
--   luacoll run -n 2 [--device cuda] tests/fail_wait.lua
local lc = require("luacoll")
local w = lc.window{ bytes = 4096 }
if lc.rank == 1 then error("rank 1 gives up on purpose") end
w:wait_signal_from(1, 0, ">=", 1)   -- one row: a stream memory operation on CUDA
w:sync()
