package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
)

// The first warm-up: heat runs once, before the first warm-up of all; the
// first warm-up of each thing measured runs its firstWarmupOps ops and
// asks for the same count of more on every rank (the slowest rank's:
// here rank 1's ops take long enough that it wants none, rank 0's are
// fast and want more, and both get rank 0's count); later warm-ups add
// nothing. A failing op fails the warm-up.
func TestFirstWarm(t *testing.T) {
	counts := make([][2]int, 2)
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		heats := 0
		f := &firstWarm{ctx: ctx, c: c, name: "bench test", heat: func() error { heats++; return nil }}
		calls := 0
		op := func() error {
			calls++
			if r == 1 {
				time.Sleep(firstWarmupBusy / firstWarmupOps * 2)
			}
			return nil
		}
		more, err := f.extra(op, "")
		if err != nil {
			return err
		}
		if calls != firstWarmupOps || heats != 1 {
			return fmt.Errorf("first warm-up: %d ops, %d heats; want %d and 1", calls, heats, firstWarmupOps)
		}
		again, err := f.extra(op, "")
		if err != nil || again != 0 {
			return fmt.Errorf("second warm-up of ours: %d more (%v), want 0", again, err)
		}
		base, err := f.extra(op, "NCCL: ")
		if err != nil {
			return err
		}
		if heats != 1 {
			return fmt.Errorf("heat ran %d times, want once", heats)
		}
		counts[r] = [2]int{more, base}
		bad := errors.New("op failed")
		if _, err := f.extra(func() error { return bad }, "MPI: "); !errors.Is(err, bad) {
			return fmt.Errorf("a failing op's warm-up: %v, want %v", err, bad)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if counts[0] != counts[1] || counts[0][0] <= 0 {
		t.Fatalf("more ops by rank: %v; want the same on both, above 0", counts)
	}
}
