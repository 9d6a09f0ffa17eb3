-- What each rank sees: its device and every device it can see, how it
-- reaches each peer, its CPUs, multicast and MPS, how the job met, and
-- the versions behind it (lc.info()).
--   luacoll run -n 2 examples/info.lua
--   luacoll run -n 2 --device cuda examples/info.lua
local lc = require("luacoll")
local i = lc.info()
local lines = { ("backend %s, device %s, CPUs %s, multicast %s, MPS %s%s"):format(i.backend, i.device, i.cpus,
  i.multicast, i.mps and "on" or "off", i.mps_daemon and " (the job's own daemon)" or ""),
  ("  launcher %s, met at %s"):format(i.launcher, i.rendezvous) }
for _, d in ipairs(i.devices) do
  local s = "  " .. d.name .. (d.mine and " (mine)" or "")
  if d.model then
    s = s .. (": %s, %.1f GiB, compute capability %s, %s"):format(d.model, (d.memory_bytes or 0) / 2^30,
      d.compute_capability or "?", d.pci_bus_id or "?")
  end
  lines[#lines + 1] = s
end
lines[#lines + 1] = "  peers: " .. table.concat(i.transports, " ")
local names = {}
for k in pairs(i.versions) do names[#names + 1] = k end
table.sort(names)
for k, name in ipairs(names) do names[k] = name .. " " .. i.versions[name] end
lines[#lines + 1] = "  versions: " .. table.concat(names, ", ")
-- one rank at a time, so the lines of a rank stay together
for r = 0, lc.size - 1 do
  if r == lc.rank then for _, l in ipairs(lines) do lc.log("%s", l) end end
  lc.barrier()
end
