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

// TestTinyTimeoutRefused: a --timeout under a millisecond is refused up
// front (it read "within 0s" in the bootstrap's error).
func TestTinyTimeoutRefused(t *testing.T) {
	r := luacoll(t, nil, "run", "-n", "2", "--timeout", "1ns", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "--timeout 1ns: must be at least 1ms") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
}
