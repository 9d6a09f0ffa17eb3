package main

import (
	"strings"
	"testing"
	"time"
)

// TestLeaverFailsNothing: rank 1 leaves with os.exit(0); rank 0 then
// frees its window (a collective rank 1 will not join) and fails. The
// failure is rank 0's own: the job exits 1, not 77 (stopped by another
// rank's failure), since rank 1 failed nothing.
func TestLeaverFailsNothing(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 1 then os.exit(0) end
w:free()`)
	r := luacoll(t, nil, "run", "-n", "2", s)
	if r.code != 1 || !strings.Contains(r.stderr, "exited early with os.exit(0)") {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
}

// TestWaitOnEndedRanks: a host wait that only ended ranks could satisfy
// (one left with os.exit(0), one's script ran to its end) fails at once
// naming them, not at its timeout; one that runs out of time while a
// rank still runs notes the ranks that had ended, beside the --timeout
// hint; one on a rank still running gets the hint alone.
func TestWaitOnEndedRanks(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`if lc.rank == 1 then os.exit(0) end
w:wait_signal_from(1, 0, ">=", 1)`, "wait_signal_from(peer 1, sig 0) >= 1 (enqueued at %s:4): can never hold: rank 1 has ended (exited early with os.exit(0) at %s:3) and writes nothing more"},
		{`if lc.rank > 0 then return end
w:wait_signal(0, ">=", 1)`, "wait_signal(sig 0, sum over all peers) >= 1 (enqueued at %s:4): can never hold: rank 1 has ended (its script ended; it waits for the others at the teardown) and writes nothing more"},
		{`if lc.rank == 1 then w:barrier() elseif lc.rank == 2 then return end
w:barrier()`, "barrier(id 0, epoch 1, every peer) >= 1 (enqueued at %s:"}, // rank 0's, or rank 1's (:3), first
		{`if lc.rank == 1 then w:barrier() elseif lc.rank == 2 then return end
w:barrier()`, "can never hold: rank 2 has ended (its script ended; it waits for the others at the teardown)"},
	} {
		s := writeScript(t, "local lc = require(\"luacoll\")\nlocal w = lc.window{ bytes = 64, timeout_ms = 60000 }\n"+c.body+"\nw:sync()")
		r := luacoll(t, nil, "run", "-n", "3", s)
		want := strings.ReplaceAll(c.want, "%s", s)
		if r.code != 1 || !strings.Contains(r.stderr, want) || r.took > 30*time.Second {
			t.Errorf("exit %d after %v, want 1 at once and %q\n%s", r.code, r.took, want, r.stderr)
		}
	}
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 1 then os.execute("sleep 2") elseif lc.rank == 2 then return end
if lc.rank == 0 then w:wait_signal(0, ">=", 1) end
w:sync()`)
	r := luacoll(t, nil, "run", "-n", "3", "--timeout", "1s", s)
	for _, want := range []string{"timed out after 1s",
		"[0] note: when it gave up, these ranks had ended and send nothing more: rank 2: its script ended; it waits for the others at the teardown",
		"give up after --timeout (1s in this run)"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 and %q\n%s", r.code, want, r.stderr)
		}
	}
	s = writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
if lc.rank == 0 then w:wait_signal_from(1, 0, ">=", 1); w:sync() else os.execute("sleep 2") end`)
	r = luacoll(t, nil, "run", "-n", "2", "--timeout", "1s", s)
	if r.code != 1 || strings.Contains(r.stderr, "had ended") || !strings.Contains(r.stderr, "give up after --timeout (1s in this run)") {
		t.Fatalf("exit %d, want 1 and the --timeout hint\n%s", r.code, r.stderr)
	}
}

// TestTinyTimeoutRefused: a --timeout under a millisecond is refused up
// front (it read "within 0s" in the bootstrap's error).
func TestTinyTimeoutRefused(t *testing.T) {
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "1ns", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "--timeout 1ns: must be at least 1ms") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}
