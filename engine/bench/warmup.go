package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/window"
)

// firstWarmup is how long each rank keeps its GPU busy before the first
// timed run of a sweep; firstWarmupOps how many more warm-up ops the first
// timed run of what is measured (ours and each baseline) gets at least;
// firstWarmupBusy how long those ops last at least (their count agreed by
// every rank, at most firstWarmupMax): launching ops back to back brings
// the host's side (its clock, caches, the launch path) to speed as well,
// and 100 ops of 1 KiB are over in under a millisecond.
const (
	firstWarmup     = 50 * time.Millisecond
	firstWarmupOps  = 100
	firstWarmupBusy = 200 * time.Millisecond
	firstWarmupMax  = 20000
)

// firstWarm is the first warm-up of a CUDA sweep. Its first timed run
// meets a GPU that was idle (clocks low): before the first warm-up of
// all, each rank collects garbage (so that no collection falls into the
// first timed run) and keeps its GPU busy for firstWarmup (heat: local
// work, so the ranks need not agree on a count); and the first run of
// ours and of each baseline (lazy set-up, first touch of their memory)
// gets firstWarmupOps more ops, and more up to firstWarmupBusy, the same
// count on every rank.
type firstWarm struct {
	ctx  context.Context
	c    *engine.Comm
	name string // the bench, for errors
	heat func() error
	// warmed lists what (ours: "", a baseline: its error prefix) has had
	// its first warm-up.
	warmed map[string]bool
}

// extra returns how many ops to add to the warm-up of what (op's calls):
// none after its first, else those of the first warm-up (see firstWarm),
// which it runs too.
func (f *firstWarm) extra(op func() error, what string) (int, error) {
	if f.warmed[what] {
		return 0, nil
	}
	if f.warmed == nil {
		f.warmed = map[string]bool{}
	}
	if len(f.warmed) == 0 {
		runtime.GC()
		if err := f.heat(); err != nil {
			return 0, fmt.Errorf("%s: warm-up: %w", f.name, err)
		}
	}
	f.warmed[what] = true
	return f.firstOps(op)
}

// firstOps runs firstWarmupOps ops and returns how many more the slowest
// rank needs for the first warm-up to last firstWarmupBusy (the largest
// count of every rank's, so that all run the same ops).
func (f *firstWarm) firstOps(op func() error) (int, error) {
	t0 := time.Now()
	for range firstWarmupOps {
		if err := op(); err != nil {
			return 0, err
		}
	}
	if err := f.c.Sync(f.ctx); err != nil {
		return 0, err
	}
	took := time.Since(t0)
	more := 0
	if left := firstWarmupBusy - took; left > 0 {
		more = int(min(int64(left)*firstWarmupOps/max(int64(took), 1), firstWarmupMax))
	}
	var mine [8]byte
	binary.LittleEndian.PutUint64(mine[:], uint64(more))
	all, err := f.c.Rank.Ex.AllGather(f.ctx, mine[:])
	if err != nil {
		return 0, fmt.Errorf("%s: warm-up: %w", f.name, err)
	}
	for _, d := range all {
		if len(d) == 8 {
			more = max(more, int(binary.LittleEndian.Uint64(d)))
		}
	}
	return more, nil
}

// heatGPU keeps this rank's GPU busy for firstWarmup with t, a put of the
// rank into its own part of w, 16 at a time.
func heatGPU(ctx context.Context, c *engine.Comm, w *window.Window, t window.Transfer) error {
	for t0 := time.Now(); time.Since(t0) < firstWarmup; {
		for range 16 {
			if err := w.Put(t); err != nil {
				return err
			}
		}
		if err := c.Sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

// warmUp runs count warm-up calls of op, and before them those of first's
// first warm-up of what (first nil: none, as on the host).
func warmUp(first *firstWarm, op func() error, what string, count int) error {
	if first != nil {
		more, err := first.extra(op, what)
		if err != nil {
			return err
		}
		count += more
	}
	for i := 0; i < count; i++ {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}
