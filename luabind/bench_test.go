package luabind

import (
	"fmt"
	"testing"
)

// BenchmarkLuaSignalRoundTrip measures the Lua side of a host-issued step:
// put_signal to itself, wait_signal_from, sync, on one rank of the host
// backend, b.N times in one chunk.
func BenchmarkLuaSignalRoundTrip(b *testing.B) {
	code := fmt.Sprintf(`local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local src = lc.buffer(8)
for i = 1, %d do
  w:put_signal(0, 0, src, 0, 8, 0)
  w:wait_signal_from(0, 0, ">=", i)
  w:sync()
end
w:free()`, b.N)
	b.ResetTimer()
	res := runLuaWith(&testing.T{}, 1, code, "bench.lua", 0)
	if res[0].err != nil {
		b.Fatal(res[0].err)
	}
}
