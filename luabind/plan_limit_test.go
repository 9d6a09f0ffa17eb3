package luabind

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport/inproc"
)

// TestPlanSizeIsCapped: recording refuses the op past the per-rank limit,
// naming the limit and the line; a plan within it whose ranks' ops exceed
// the limit over all ranks is refused once gathered. (The limits are
// lowered here; the real ones are plan.MaxOps and plan.MaxTotalOps.)
func TestPlanSizeIsCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comm, err := enginetest.OpenInProc(ctx, inproc.NewGroup(1), 0, enginetest.JobID("lt"), engine.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = comm.Close(nil) }()
	var out bytes.Buffer
	s := New(comm, &out)
	defer s.Close()
	s.Ctx = ctx
	s.plans.maxOps, s.plans.maxTotal = 10, 8
	code := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local function body(n) for i = 1, n do w:signal(0, 0) end end -- SIGNAL
local p = lc.plan(body, 8)
assert(p:info().ops == 8)
local ok, err = pcall(lc.plan, body, 11)
assert(not ok and err:find("test.lua:4: rank 0: w:signal: a plan holds at most 10 ops per rank (and 8 over all ranks)", 1, true), err)
ok, err = pcall(lc.plan, body, 9)
assert(not ok and err:find("the ranks recorded 9 ops together, more than a plan may hold (8 over all ranks)", 1, true), err)
print("capped")
`
	if err := s.Run([]byte(code), "test.lua", nil); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "capped") {
		t.Fatal(out.String())
	}
}
