package luabind

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/transport"
)

// TestBufferBeyondTheHostsMemory: two ranks of one host each asking for a
// buffer of three quarters of the host's available memory are refused,
// naming both and what the host has, before anything is allocated (the
// kernel would promise both and kill a rank once they are filled); the
// ranks go on.
func TestBufferBeyondTheHostsMemory(t *testing.T) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	avail, ok := transport.MemAvailable(f)
	f.Close()
	if !ok || avail/4*3 > 1<<40 {
		t.Skip("MemAvailable unknown, or beyond the largest buffer")
	}
	code := fmt.Sprintf(`
local lc = require("luacoll")
local ok, err = pcall(lc.buffer, %d)
assert(not ok, "a buffer of 3/4 of the host's memory per rank was made")
print(err)
local b = lc.buffer(4096)
b:fill("const", 1)
print("went on")
`, avail/4*3)
	res := runLua(t, 2, code)
	mustAllOK(t, res)
	for r, x := range res {
		if !strings.Contains(x.out, "buffer memory: 2 ranks on this host x ") || !strings.Contains(x.out, "but this host has") ||
			!strings.Contains(x.out, "went on") {
			t.Fatalf("rank %d:\n%s", r, x.out)
		}
	}
}
