package luabind

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport/inproc"
)

// stopLimit is how long a run that must stop early may take here before
// the test calls it a runaway (the runs below would take hours).
const stopLimit = 30 * time.Second

// runBounded is runLuaWith that fails the test when the ranks are still
// running after stopLimit.
func runBounded(t *testing.T, n int, code string, timeout time.Duration) []rankResult {
	t.Helper()
	done := make(chan []rankResult, 1)
	go func() { done <- runLuaRanks(&testing.T{}, n, code, "test.lua", timeout, nil) }()
	select {
	case res := <-done:
		return res
	case <-time.After(stopLimit):
		t.Fatalf("still running after %v", stopLimit)
		return nil
	}
}

// TestPlanRunStopsAtStreamError: a wait of replay 1 times out on rank 0,
// which asked for a billion replays; p:run ends with that wait's error
// instead of enqueueing the rest.
func TestPlanRunStopsAtStreamError(t *testing.T) {
	code := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 200 }
local b = lc.buffer(8)
local nx = (lc.rank + 1) % lc.size
local p = lc.plan(function(w)
  w:put_signal(nx, 0, b, 0, 8, 0)
  w:wait_signal(0, ">=", 1) -- WAIT
end, w)
local ok, err = pcall(function() p:run{ times = lc.rank == 0 and 1e9 or 1 }; w:sync() end)
print("RESULT", ok, err)
`
	res := runBounded(t, 2, code, 3*time.Second)
	if res[1].err != nil || !strings.Contains(res[1].out, "RESULT\ttrue") {
		t.Fatalf("rank 1: %v\n%s", res[1].err, res[1].out)
	}
	out := res[0].out
	if !strings.Contains(out, "RESULT\tfalse") || !strings.Contains(out, ">= 2 (enqueued at test.lua:8): timed out") ||
		!strings.Contains(out, "replays enqueued)") {
		t.Fatalf("rank 0:\n%s", out)
	}
}

// selfPlan replays, on one rank, a plan that signals itself and waits
// for it, a billion times.
const selfPlan = `
local lc = require("luacoll")
local w = lc.window{ bytes = 64 }
local b = lc.buffer(8)
local p = lc.plan(function(w)
  w:put_signal(0, 0, b, 0, 8, 0)
  w:wait_signal(0, ">=", 1)
end, w)
p:run{ times = 1e9 }
`

// runStopped runs code on one in-process rank; 200 ms in, stop is called
// with the rank's Comm and the cancel of the chunk's context. It returns
// the script's error, failing the test when the script still runs after
// stopLimit.
func runStopped(t *testing.T, code string, stop func(c *engine.Comm, cancel context.CancelCauseFunc)) error {
	t.Helper()
	g := inproc.NewGroup(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comm, err := enginetest.OpenInProc(ctx, g, 0, enginetest.JobID("lt"), engine.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = comm.Close(nil) }()
	var out bytes.Buffer
	s := New(comm, &out)
	defer s.Close()
	chunk, end := context.WithCancelCause(ctx)
	defer end(nil)
	s.Ctx = chunk
	go func() {
		time.Sleep(200 * time.Millisecond)
		stop(comm, end)
	}()
	done := make(chan error, 1)
	go func() { done <- s.Run([]byte(code), "test.lua", nil) }()
	select {
	case err = <-done:
		return err
	case <-time.After(stopLimit):
		t.Fatalf("still running after %v", stopLimit)
		return nil
	}
}

// TestPlanRunStopsOnAbort: the job aborts (another rank failed) while
// this rank replays a healthy plan a billion times; the run ends with
// the abort's reason.
func TestPlanRunStopsOnAbort(t *testing.T) {
	err := runStopped(t, selfPlan, func(c *engine.Comm, _ context.CancelCauseFunc) {
		c.Abort.Set(errors.New("rank 1 failed in the test"))
	})
	if err == nil || !strings.Contains(err.Error(), "rank 1 failed in the test") {
		t.Fatalf("got %v", err)
	}
}

// TestPlanRunInterrupted: the REPL's Ctrl-C (the chunk's context ends and
// the stream is interrupted) ends a billion-replay p:run.
func TestPlanRunInterrupted(t *testing.T) {
	interrupted := errors.New("interrupted by the test")
	err := runStopped(t, selfPlan, func(c *engine.Comm, end context.CancelCauseFunc) {
		end(interrupted)
		c.Rank.Stream.Interrupt(interrupted)
	})
	if err == nil || !strings.Contains(err.Error(), "interrupted by the test") {
		t.Fatalf("got %v", err)
	}
}

// TestEagerLoopStopsAtStreamError: a loop of a billion waits, the first
// of which times out, ends with that wait's error soon after instead of
// enqueueing the rest.
func TestEagerLoopStopsAtStreamError(t *testing.T) {
	code := `
local lc = require("luacoll")
local w = lc.window{ bytes = 64, timeout_ms = 200 }
local ok, err = pcall(function()
  for i = 1, 1e9 do w:wait_signal(0, ">=", i) end -- WAIT
  w:sync()
end)
print("RESULT", ok, err)
`
	res := runBounded(t, 1, code, 3*time.Second)
	if out := res[0].out; !strings.Contains(out, "RESULT\tfalse") || !strings.Contains(out, "(enqueued at test.lua:5): timed out") {
		t.Fatalf("%v\n%s", res[0].err, out)
	}
}
