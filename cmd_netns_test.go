package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// twoHosts is a job split over two network namespaces joined by a veth
// pair (scripts/netns.sh), each node with a private /dev/shm and hostname:
// two hosts as far as luacoll and UCX can tell.
type twoHosts struct {
	name string
	port int
}

// newTwoHosts makes the namespaces, or skips the test where the machine
// refuses them.
func newTwoHosts(t *testing.T) *twoHosts {
	t.Helper()
	needUCX(t)
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (apt-get install iproute2)")
	}
	h := &twoHosts{name: fmt.Sprintf("lc%d", rand.IntN(1e6)), port: 20000 + rand.IntN(10000)}
	if out, err := exec.Command("scripts/netns.sh", "up", h.name).CombinedOutput(); err != nil {
		t.Skipf("this machine refuses network namespaces (%v): %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("scripts/netns.sh", "down", h.name).Run() })
	return h
}

// node starts ranks (of a job of size ranks) in node k, running
// `luacoll ARGS...` each; the shell prints LEFTOVER lines for whatever the
// ranks left in the node's /dev/shm or temporary directory.
func (h *twoHosts) node(ctx context.Context, k int, ranks []int, size int, env []string, args ...string) *exec.Cmd {
	var rs []string
	for _, r := range ranks {
		rs = append(rs, fmt.Sprint(r))
	}
	script := `export UCX_NET_DEVICES=$LC_NODE_DEV TMPDIR=$(mktemp -d)
pids=""
local=0
for r in ` + strings.Join(rs, " ") + `; do
  LUACOLL_RANK=$r LUACOLL_LOCAL_RANK=$local LUACOLL_LOCAL_SIZE=` + fmt.Sprint(len(ranks)) + ` "$@" &
  pids="$pids $!"; local=$((local + 1))
done
echo "PIDS$pids"
st=0
for p in $pids; do wait $p || st=$?; done
ls -A /dev/shm "$TMPDIR" | grep -v '^/\|^$' | sed 's/^/LEFTOVER /'
rmdir "$TMPDIR"
exit $st`
	cmd := exec.CommandContext(ctx, "scripts/netns.sh", append([]string{"node", h.name, fmt.Sprint(k), "sh", "-c", script, "sh", bin}, args...)...)
	cmd.Env = append(cleanEnv(), append([]string{"LUACOLL_SIZE=" + fmt.Sprint(size),
		fmt.Sprintf("LUACOLL_ADDR=10.231.7.1:%d", h.port), "LUACOLL_JOB_SECRET=netns-test", "UCX_TLS=tcp"}, env...)...)
	return cmd
}

// run runs a job with ranks split over the two nodes and returns each
// node's output and exit status.
func (h *twoHosts) run(t *testing.T, ranks [2][]int, args ...string) (out [2]string, code [2]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	size := len(ranks[0]) + len(ranks[1])
	var cmds [2]*exec.Cmd
	var bufs [2]bytes.Buffer
	for k := range 2 {
		cmds[k] = h.node(ctx, k, ranks[k], size, nil, args...)
		cmds[k].Stdout, cmds[k].Stderr = &bufs[k], &bufs[k]
		if err := cmds[k].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 2 {
		err := cmds[k].Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			code[k] = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("node %d: %v", k, err)
		}
		out[k] = bufs[k].String()
	}
	h.port++
	return out, code
}

// The window suite and the all-gather checks pass between two hosts, with
// two ranks on each (shared memory inside a host, UCX over TCP between).
func TestTwoHosts(t *testing.T) {
	h := newTwoHosts(t)
	for _, c := range []struct {
		ranks  [2][]int
		script string
		want   string
	}{
		{[2][]int{{0, 1}, {2, 3}}, "tests/suite.lua", "[0] suite: 10 passed, 0 failed"},
		{[2][]int{{0}, {1}}, "tests/suite.lua", "[0] suite: 10 passed, 0 failed"},
		{[2][]int{{0, 2}, {1, 3}}, "tests/agp.lua", "[0] agp: 7 passed, 0 failed"},
		{[2][]int{{0}, {1, 2}}, "tests/agp_mismatch.lua", "[0] agp_mismatch: 3 passed, 0 failed"},
	} {
		out, code := h.run(t, c.ranks, "run", c.script)
		all := out[0] + out[1]
		if code != [2]int{} || !strings.Contains(all, c.want) || strings.Contains(all, "LEFTOVER") {
			t.Fatalf("%s with ranks %v: exit %v\nnode 0:\n%s\nnode 1:\n%s", c.script, c.ranks, code, out[0], out[1])
		}
	}
}

// A script on two hosts sees the other host's ranks on the network.
func TestTwoHostsTopology(t *testing.T) {
	h := newTwoHosts(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local k0, v0 = w:transport(0)
local k2, v2 = w:transport(2)
lc.log("to 0: %s %s, to 2: %s %s", k0, tostring(v0), k2, tostring(v2))
w:free()`)
	out, code := h.run(t, [2][]int{{0, 1}, {2}}, "run", s)
	if code != [2]int{} {
		t.Fatalf("exit %v\n%s\n%s", code, out[0], out[1])
	}
	if !strings.Contains(out[0], "to 0: shm nil, to 2: net ucx: tcp/"+h.name+"-v0") ||
		!strings.Contains(out[1], "to 0: net ucx: tcp/"+h.name+"-v1, to 2: self nil") {
		t.Errorf("transports:\n%s\n%s", out[0], out[1])
	}
}

// Every rank of one host killed with SIGKILL mid-wait: the other host's
// ranks report a dead peer within the window timeout and exit non-zero,
// leaving nothing in their /dev/shm or temporary directory.
func TestTwoHostsKilledHost(t *testing.T) {
	h := newTwoHosts(t)
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 4096, timeout_ms = 30000 }
local src = lc.buffer(64)
for p = 0, lc.size - 1 do w:put(p, 0, src, 0, 64) end
w:sync()
lc.barrier()
lc.log("waiting")
w:wait_signal(0, ">=", 1)
w:sync()`)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var cmds [2]*exec.Cmd
	var bufs [2]syncBuffer
	for k, ranks := range [2][]int{{0, 1}, {2, 3}} {
		cmds[k] = h.node(ctx, k, ranks, 4, nil, "run", "--timeout", "30s", s)
		cmds[k].Stdout, cmds[k].Stderr = &bufs[k], &bufs[k]
		if err := cmds[k].Start(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(bufs[1].String(), "waiting") < 2 || strings.Count(bufs[0].String(), "waiting") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("ranks never waited\n%s\n%s", bufs[0].String(), bufs[1].String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The ranks of node 1 are the PIDS its shell printed.
	var victims []int
	for _, l := range strings.Split(bufs[1].String(), "\n") {
		if f, ok := strings.CutPrefix(l, "PIDS"); ok {
			for _, p := range strings.Fields(f) {
				var pid int
				fmt.Sscan(p, &pid)
				victims = append(victims, pid)
			}
		}
	}
	if len(victims) != 2 {
		t.Fatalf("node 1's ranks: %v\n%s", victims, bufs[1].String())
	}
	start := time.Now()
	for _, pid := range victims {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	err0 := cmds[0].Wait()
	took := time.Since(start)
	_ = cmds[1].Wait()
	out := bufs[0].String()
	if ee, ok := err0.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("node 0 exited %v\n%s", err0, out)
	}
	if took > 30*time.Second {
		t.Errorf("node 0 took %v to stop", took)
	}
	if !strings.Contains(out, "rank 2 died") && !strings.Contains(out, "rank 3 died") {
		t.Errorf("node 0 does not name a dead rank:\n%s", out)
	}
	if strings.Contains(out, "LEFTOVER") {
		t.Errorf("node 0 left files behind:\n%s", out)
	}
}
