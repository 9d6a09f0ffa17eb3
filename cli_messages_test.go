package main

import (
	"strings"
	"testing"
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

// TestTimeoutNamesEndedRanks: a wait that runs out of time while the
// ranks it waits on have ended (one left with os.exit(0), one's script
// ran to its end) says so, rather than suggesting a longer --timeout;
// a wait on a rank still running gets the --timeout hint.
func TestTimeoutNamesEndedRanks(t *testing.T) {
	s := writeScript(t, `local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 1000 }
if lc.rank == 1 then os.exit(0) end
if lc.rank == 2 then return end
w:wait_signal(0, ">=", 1)
w:sync()`)
	r := luacoll(t, nil, "run", "-n", "3", "--timeout", "1s", s)
	want := "[0] hint: when the wait gave up, these ranks had ended and send nothing more: rank 1: exited early with os.exit(0) at " +
		s + ":3; rank 2: its script had ended (it waits for the others to end theirs)"
	if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "--timeout (") {
		t.Fatalf("exit %d, want 1 and %q\n%s", r.code, want, r.stderr)
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
