package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A 256 MiB put_signal from rank 1 to rank 0 whose link goes down before
// it is sent, then a barrier: under --timeout 5s rank 1's error comes
// within the timeout (not after a second one spent waiting for the put)
// and names the put to rank 0 that never completed, besides the barrier.
// Without a barrier, the sync's flush names the put itself.
func TestTwoHostsStalledPut(t *testing.T) {
	h := newTwoHosts(t)
	for _, then := range []string{"w:barrier(0); w:sync()", "w:sync()"} {
		dir := t.TempDir()
		s := writeScript(t, `local lc = require("luacoll")
local n = 256 * 1024 * 1024
local w = lc.window{ bytes = n }
local src = lc.buffer(n)
lc.barrier()
lc.log("ready")
while not io.open(arg[1] .. "/go") do end
local t0 = lc.now()
local ok, err
if lc.rank == 1 then
  ok, err = pcall(function() w:put_signal(0, 0, src, 0, n, 0); `+then+` end)
else
  ok, err = pcall(function() w:wait_signal(0, ">=", 1); w:sync() end)
end
lc.log("after %.1f s: %s", lc.now() - t0, tostring(err))
os.exit(0)`)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		var cmds [2]*exec.Cmd
		var bufs [2]syncBuffer
		for k := range 2 {
			cmds[k] = h.node(ctx, k, []int{k}, 2, []string{"LC_SHM_SIZE=1g"}, "run", "--timeout", "5s", s, dir)
			cmds[k].Stdout, cmds[k].Stderr = &bufs[k], &bufs[k]
			cmds[k].WaitDelay = 5 * time.Second
			if err := cmds[k].Start(); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(bufs[0].String(), "ready") || !strings.Contains(bufs[1].String(), "ready") {
			if time.Now().After(deadline) {
				t.Fatalf("ranks never got ready\n%s\n%s", bufs[0].String(), bufs[1].String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if out, err := exec.Command("ip", "-n", h.name+"-0", "link", "set", h.name+"-v0", "down").CombinedOutput(); err != nil {
			t.Fatalf("taking the link down: %v %s", err, out)
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for !strings.Contains(bufs[1].String(), "after ") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		out := bufs[1].String()
		// The ranks may still wait on the bootstrap across the dead link:
		// end them.
		_ = exec.Command("sh", "-c", "kill -9 $(ip netns pids "+h.name+"-0) $(ip netns pids "+h.name+"-1) 2>/dev/null").Run()
		cancel()
		_ = cmds[0].Wait()
		_ = cmds[1].Wait()
		_ = exec.Command("ip", "-n", h.name+"-0", "link", "set", h.name+"-v0", "up").Run()
		h.port++
		if !strings.Contains(out, "put_signal to rank 0 (256 MiB)") || !strings.Contains(out, "the connection to rank 0 is closed") {
			t.Fatalf("%s: rank 1 does not name the put:\n%s", then, out)
		}
		if strings.Contains(out, "after 6") || strings.Contains(out, "after 7") || strings.Contains(out, "after 8") ||
			strings.Contains(out, "after 9") || strings.Contains(out, "after 1") {
			t.Fatalf("%s: rank 1 took longer than its timeout:\n%s", then, out)
		}
	}
}
