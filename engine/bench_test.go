package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// The ping-pong's data check counts the ranks (0 and 1) whose window does
// not hold the other's payload: both before any put, one after rank 0's
// put alone, none after both; the benchmark itself reports none.
func TestPingPongPayloadCheck(t *testing.T) {
	errs := withComms(t, 3, Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *Comm) error {
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
		for step, want := range []int{2, 1, 0} {
			if step > 0 && (r == 0 || (step == 2 && r == 1)) {
				if err := w.Put(window.Transfer{Peer: 1 - r, Local: src, N: 8}); err != nil {
					return err
				}
			}
			if err := barrierSync(ctx, w); err != nil {
				return err
			}
			got, err := checkPayload(ctx, c, w, fmt.Sprintf("test.payload.%d", step))
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
