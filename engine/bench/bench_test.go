package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The ping-pong's data check counts the ranks (0 and 1) whose window does
// not hold the other's payload: both before any put (one when rank 0 does
// not look), one after rank 0's put alone, none after both; the benchmark
// itself reports none.
func TestPingPongPayloadCheck(t *testing.T) {
	errs := enginetest.WithComms(t, 3, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "test.payload", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer c.FreeWindow(ctx, w)
		src, err := c.NewBuffer(8)
		if err != nil {
			return err
		}
		defer src.Free()
		if err := src.Fill(transport.FillRandU32, payloadSeed(r)); err != nil {
			return err
		}
		// Step 0 once more with rank 0 not looking (its run failed): only
		// rank 1's missing payload counts.
		if got, err := checkPayload(ctx, c, w, "test.payload.skip", r != 0); err != nil || got != 1 {
			return fmt.Errorf("rank 0 not looking: %d wrong, %v; want 1", got, err)
		}
		for step, want := range []int{2, 1, 0} {
			if step > 0 && (r == 0 || (step == 2 && r == 1)) {
				if err := w.Put(window.Transfer{Peer: 1 - r, Local: src, N: 8}); err != nil {
					return err
				}
			}
			if err := barrierSync(ctx, w); err != nil {
				return err
			}
			got, err := checkPayload(ctx, c, w, fmt.Sprintf("test.payload.%d", step), true)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("step %d: %d wrong, want %d", step, got, want)
			}
		}
		row, err := BenchPingPong(ctx, c, 50, "auto")
		if err != nil {
			return err
		}
		if r == 0 && (row.Wrong != 0 || row.Seconds <= 0) {
			return fmt.Errorf("ping-pong row %+v", row)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Ranks whose --ipc differ cannot make a CUDA window together: the
// collective check names the way each would share it, on every rank. The
// host backend shares one way whatever ipc says: there they agree.
func TestWindowIPCMustAgree(t *testing.T) {
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 5 * time.Second}, func(r int, c *engine.Comm) error {
		c.Opts.IPC = []string{"legacy", "vmm"}[r]
		o := window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1}
		w, err := c.NewWindow(context.Background(), "test.window", o)
		if err != nil {
			return fmt.Errorf("host window: %w", err)
		}
		if err := c.FreeWindow(context.Background(), w); err != nil {
			return err
		}
		// What a CUDA job checks (the check fails before any memory is made).
		c.Opts.Device = "cuda"
		_, err = c.NewWindow(context.Background(), "test.window", o)
		c.Opts.Device = "host"
		if err == nil {
			return fmt.Errorf("a window shared two ways was made")
		}
		if !strings.Contains(err.Error(), "differs across ranks") || !strings.Contains(err.Error(), "(ipc vmm, symmetric auto)") {
			return fmt.Errorf("unclear error: %v", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestFailureMeetsNoCollective: a measurement that fails on one rank does
// not free its window on the way out (a collective), so the rank still
// measuring learns of the failure itself rather than of a collective
// mismatch that would read as a second cause.
func TestFailureMeetsNoCollective(t *testing.T) {
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) (rerr error) {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "test.fail", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1})
		if err != nil {
			return err
		}
		defer freeAfter(ctx, c, w, &rerr)
		if r == 1 {
			return fmt.Errorf("size 2: measurement broke")
		}
		_, err = c.SumInt(ctx, "test.fail.check", 0)
		return err
	})
	if errs[1] == nil || errs[0] == nil {
		t.Fatalf("errors %v", errs)
	}
	if msg := errs[0].Error(); strings.Contains(msg, "differs across ranks") || !strings.Contains(msg, "rank 1 failed") || !strings.Contains(msg, "measurement broke") {
		t.Errorf("rank 0: %v, want rank 1's failure", errs[0])
	}
}

// bench put --bidir with more ranks than the two that time: the others
// wait at the sizes' barriers while ranks 0 and 1 line up between them,
// and every rank finishes with the data checked.
func TestBenchPutBidirThreeRanks(t *testing.T) {
	errs := enginetest.WithComms(t, 3, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		rows, err := BenchPut(context.Background(), c, []uint64{8, 4096}, 5, "auto", true, "push", nil, nil)
		if err != nil {
			return err
		}
		if len(rows) != 2 {
			return fmt.Errorf("%d rows, want 2", len(rows))
		}
		for _, row := range rows {
			if row.Wrong != 0 {
				return fmt.Errorf("%d bytes: %d wrong", row.Bytes, row.Wrong)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
