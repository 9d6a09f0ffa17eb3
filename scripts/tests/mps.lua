-- Checks a rank's MPS state against arg[1] ("job": the launcher's own
-- daemon, "on": some MPS server, "off": none), then moves a device-side
-- signal round the ring, which ranks that share a GPU do quickly only
-- under MPS.
--   luacoll run -n 2 --device cuda --gpus 0,0 --mps on tests/mps.lua job
local lc = require("luacoll")
local want = arg[1] or "job"
local i = lc.info()
lc.log("mps %s, daemon %s, multicast %s", tostring(i.mps), tostring(i.mps_daemon), i.multicast)
if want == "job" then
  assert(i.mps == true, "this rank's contexts do not go through MPS")
  assert(i.mps_daemon == "job", "no daemon of the job's own")
elseif want == "on" then
  assert(i.mps == true, "this rank's contexts do not go through MPS")
elseif want == "off" then
  assert(i.mps == false, "MPS is on")
else
  error("arg[1] = " .. tostring(want) .. ": want job, on or off")
end
assert(i.multicast == "supported, not used" or i.multicast == "not supported", "multicast " .. tostring(i.multicast))
local w = lc.window{ bytes = 64, path = "sm" }
local t0 = lc.now()
for k = 1, 100 do
  w:signal((lc.rank + 1) % lc.size, 0)
  w:wait_signal(0, ">=", k)
end
w:sync()
lc.log("100 signal rounds in %.1f us each", (lc.now() - t0) * 1e6 / 100)
w:free()
