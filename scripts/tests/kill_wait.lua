-- Fault check: every rank waits on a signal nobody sends; the test kills
-- one rank with SIGKILL and the others must stop with an error naming it.
--   luacoll run -n 2 [--device cuda] --timeout 60s tests/kill_wait.lua
local lc = require("luacoll")
local w = lc.window{ bytes = 1024 * 1024 }
lc.log("waiting")
w:wait_signal(0, ">=", 1)
w:sync()
