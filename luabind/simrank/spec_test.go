package simrank

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/engine/plan/cost"
)

// runAlone is run with or without the verification ahead of rank 0.
func runAhead(t *testing.T, ranks, per, ahead int, script string, args ...string) (string, *Result, error) {
	t.Helper()
	m, err := cost.Default("host")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := Run(context.Background(), Options{Ranks: ranks, PerNode: per, Src: []byte(script), Name: "s.lua", Args: args,
		Model: m, ModelName: "host", Mode: "host", Stdout: &out, Ahead: ahead})
	return out.String(), res, err
}

// The shipped schedules as ag-sim.lua checks them, then plans whose rank
// 0 the shadow cannot foresee: one rank 0 verifies with other options
// than its shadow (which sees a pending report), one verified only when
// the next is made, and one after rank 0 (alone: not its shadow) used os.
const aheadScript = `
local lc = require("luacoll")
local ag = require("allgather")
local n = 4096
local w = lc.window{ bytes = lc.size * n, signals = 1, counters = 1, barriers = 1 }
local src = lc.buffer(n)
for _, algo in ipairs({ "ring", "direct", "hier" }) do
  local p = lc.plan(ag[algo], w, src, 0, n)
  local rep = p:verify{ collective = "allgather", n = n, src = src }
  if lc.rank == 0 then print(algo, rep.summary) end
  p:free()
end
local p = lc.plan(ag.ring, w, src, 0, n)
local rep = p:verify{ collective = "allgather", n = n, src = src }
local again = p:verify{ collective = "allgather", n = n, src = src, replays = rep.pending and 2 or 3 }
if lc.rank == 0 then print("again", again.summary) end
p:free()
if arg[1] == "race" then lc.plan(function() w:put((lc.rank + 1) % lc.size, 0, src, 0, 8) end) end
local last = lc.plan(ag.direct, w, src, 0, n)
if lc.rank == 0 and arg[1] == "os" then print(type(os.time())) end
local rep2 = last:verify{ collective = "allgather", n = n, src = src, replays = 3 }
if lc.rank == 0 then print("last", rep2.summary) end
`

// TestAheadMatchesAlone checks that verifying ahead of rank 0 changes
// nothing of what rank 0 prints and returns, the verdicts included (a
// plan with a race fails, as it fails alone), and that it verified ahead
// the plans its shadow foresaw.
func TestAheadMatchesAlone(t *testing.T) {
	for i, c := range []struct {
		arg   string
		ahead int
	}{{"", 5}, {"os", 4}, {"race", 0}, {"", 5}, {"os", 4}, {"race", 0}} {
		most := 1 + i/3 // one verification at a time, then two
		alone, resAlone, errAlone := runAhead(t, 32, 8, 0, aheadScript, c.arg)
		ahead, resAhead, errAhead := runAhead(t, 32, 8, most, aheadScript, c.arg)
		if alone != ahead || (errAlone == nil) != (errAhead == nil) || (errAlone != nil && errAlone.Error() != errAhead.Error()) {
			t.Fatalf("%q, %d at once: alone: %v\n%s\nahead: %v\n%s", c.arg, most, errAlone, alone, errAhead, ahead)
		}
		if !strings.Contains(alone, "[0] ring\tok: 32 ranks") || !strings.Contains(alone, "[0] again\tok: ") {
			t.Fatalf("%q: output\n%s", c.arg, alone)
		}
		if c.arg == "race" {
			if errAlone == nil || !strings.Contains(errAlone.Error(), "plan 5 (made at s.lua:18) failed verification") ||
				!strings.Contains(alone, "problems") {
				t.Fatalf("%q: error %v\n%s", c.arg, errAlone, alone)
			}
			continue
		}
		if errAlone != nil || !strings.Contains(alone, "[0] last\tok: ") {
			t.Fatalf("%q: error %v\n%s", c.arg, errAlone, alone)
		}
		// Ahead and the times aside, the results are the same.
		if resAlone.Ahead != 0 || resAhead.Ahead != c.ahead {
			t.Errorf("%q, %d at once: %d verifications ahead alone, %d with the shadow; want 0 and %d", c.arg, most, resAlone.Ahead, resAhead.Ahead, c.ahead)
		}
		resAlone.Ahead, resAlone.Elapsed, resAlone.PeakRSS, resAlone.HeapPeak = 0, 0, 0, 0
		resAhead.Ahead, resAhead.Elapsed, resAhead.PeakRSS, resAhead.HeapPeak = 0, 0, 0, 0
		if !reflect.DeepEqual(resAlone, resAhead) {
			t.Errorf("%q: results differ:\n%+v\n%+v", c.arg, resAlone, resAhead)
		}
	}
}
