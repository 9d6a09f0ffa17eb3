-- A ring put: every rank writes its rank into the next rank's window.
local me, n = lc.rank, lc.size
ring = ring or lc.window{bytes = 8}
local src = lc.buffer(8)
src:set_u32(0, 100 + me)
ring:put_signal((me + 1) % n, 0, src, 0, 8, 0)
ring:wait_signal(0, ">=", 1)
ring:sync()
received = ring:buffer():get_u32(0)
print(string.format("rank %d got %d", me, received))
ring:reset_signals()
ring:sync()
lc.barrier()
return received
