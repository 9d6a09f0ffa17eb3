package allgather_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport/knobs"

	"github.com/luacoll/luacoll/window"
)

// chunkByte is the pattern of rank r's chunk in round i.
func chunkByte(r, i int) byte { return byte(31*r + 7*i + 1) }

// The host all-gather at sizes on both sides of the eager limit (staging
// area) and of direct puts, out of place and in place: every round's
// chunks arrive, also after a burst of execs enqueued back to back.
func TestAllGatherHostProtocols(t *testing.T) {
	// Puts past the eager limit copy through the cache or around it,
	// by the cache size: both ways.
	for _, cache := range []string{"1G", "0"} {
		t.Run("cache "+cache, func(t *testing.T) {
			t.Cleanup(func() { knobs.Reload() }) // after t.Setenv's own
			t.Setenv(knobs.HostCache.Name, cache)
			knobs.Reload()
			testAllGatherHostProtocols(t)
		})
	}
}

// A cache size the knob cannot take is refused when the ranks open, with
// an error naming the variable, before anything is made.
func TestAllGatherHostCacheEnv(t *testing.T) {
	t.Cleanup(func() { knobs.Reload() })
	t.Setenv(knobs.HostCache.Name, "32MiB")
	knobs.Reload()
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(int, *engine.Comm) error {
		return errors.New("opened")
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), knobs.HostCache.Name+`="32MiB"`) {
			errs[r] = fmt.Errorf("open: %v, want an error naming %s", err, knobs.HostCache.Name)
		} else {
			errs[r] = nil
		}
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func testAllGatherHostProtocols(t *testing.T) {
	const ranks = 3
	big := uint64(1<<20 + 4160) // past CachedPiece, not a multiple of it
	sizes := []uint64{0, 64, allgather.AgHostEagerMax - 64, allgather.AgHostEagerMax, allgather.AgHostEagerMax + 64, big}
	errs := enginetest.WithComms(t, ranks, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "w", window.Options{Bytes: big * ranks, Signals: 2, Counters: 1, Barriers: 2, Timeout: 20 * time.Second})
		if err != nil {
			return err
		}
		src, err := c.NewBuffer(big)
		if err != nil {
			return err
		}
		ag, err := allgather.New(ctx, c, w, "auto", false)
		if err != nil {
			return err
		}
		check := func(n uint64, round int, what string) error {
			for p := 0; p < ranks; p++ {
				got, err := w.Buffer().Read(uint64(p)*n, n)
				if err != nil {
					return err
				}
				for i, b := range got {
					if b != chunkByte(p, round) {
						return fmt.Errorf("n=%d %s round %d: byte %d of rank %d's chunk is %d, want %d", n, what, round, i, p, b, chunkByte(p, round))
					}
				}
			}
			return nil
		}
		fill := func(b *window.Buffer, off, n uint64, round int) error {
			return b.Write(off, []byte(strings.Repeat(string(chunkByte(r, round)), int(n))))
		}
		for _, n := range sizes {
			for round := 0; round < 4; round++ {
				inPlace := round%2 == 1
				if inPlace {
					err = fill(w.Buffer(), uint64(r)*n, n, round)
				} else {
					err = fill(src, 0, n, round)
				}
				if err != nil {
					return err
				}
				if inPlace {
					err = ag.Exec(ctx, w.Buffer(), uint64(r)*n, n)
				} else {
					err = ag.Exec(ctx, src, 0, n)
				}
				if err != nil {
					return err
				}
				if err := c.Sync(ctx); err != nil {
					return err
				}
				if err := check(n, round, fmt.Sprintf("in place %v", inPlace)); err != nil {
					return err
				}
			}
			// A burst: the same data 50 times, synced once.
			if err := fill(src, 0, n, 9); err != nil {
				return err
			}
			for i := 0; i < 50; i++ {
				if err := ag.Exec(ctx, src, 0, n); err != nil {
					return err
				}
			}
			if err := c.Sync(ctx); err != nil {
				return err
			}
			if err := check(n, 9, "burst"); err != nil {
				return err
			}
		}
		return ag.Destroy(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Ranks whose n fall on either side of the eager limit run different
// protocols, and still see each other's tag for the exec and fail at once
// naming both sizes, not at the timeout.
func TestAllGatherHostMismatchAcrossProtocols(t *testing.T) {
	n := []uint64{allgather.AgHostEagerMax, allgather.AgHostEagerMax + 64}
	errs := enginetest.WithComms(t, 2, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "w", window.Options{Bytes: 4 * allgather.AgHostEagerMax, Signals: 2, Counters: 1, Barriers: 2, Timeout: 10 * time.Minute})
		if err != nil {
			return err
		}
		src, err := c.NewBuffer(2 * allgather.AgHostEagerMax)
		if err != nil {
			return err
		}
		ag, err := allgather.New(ctx, c, w, "auto", false)
		if err != nil {
			return err
		}
		if err := ag.Exec(ctx, src, 0, n[r]); err != nil {
			return err
		}
		serr := c.Sync(ctx)
		want := fmt.Sprintf("rank %d passed n=%d, this rank n=%d", 1-r, n[1-r], n[r])
		if serr == nil || !strings.Contains(serr.Error(), want) || !strings.Contains(serr.Error(), "seen as soon as") {
			return fmt.Errorf("got %v, want the mismatch (%s) seen at once", serr, want)
		}
		return ag.Destroy(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A window whose share per rank is not a whole number of 64-byte lines
// still stages its largest exec: the limit rounds the share up, and an
// exec of the whole share gathers every chunk.
func TestAllGatherStagesTheWholeShare(t *testing.T) {
	const ranks, n = 3, 1000
	errs := enginetest.WithComms(t, ranks, engine.Options{Device: "host", Timeout: 20 * time.Second}, func(r int, c *engine.Comm) error {
		ctx := context.Background()
		w, err := c.NewWindow(ctx, "w", window.Options{Bytes: ranks * n, Signals: 2, Counters: 1, Barriers: 2, Timeout: 20 * time.Second})
		if err != nil {
			return err
		}
		ag, err := allgather.New(ctx, c, w, "direct", false)
		if err != nil {
			return err
		}
		if got := allgather.HostEagerMax(ag); got < n {
			return fmt.Errorf("staged up to %d bytes a rank, want at least the share of %d", got, n)
		}
		src, err := c.NewBuffer(n)
		if err != nil {
			return err
		}
		for round := 1; round <= 3; round++ {
			if err := src.Write(0, bytes.Repeat([]byte{chunkByte(r, round)}, n)); err != nil {
				return err
			}
			if err := ag.Exec(ctx, src, 0, n); err != nil {
				return err
			}
			if err := c.Sync(ctx); err != nil {
				return err
			}
			for p := 0; p < ranks; p++ {
				got, err := w.Buffer().Read(uint64(p)*n, n)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, bytes.Repeat([]byte{chunkByte(p, round)}, n)) {
					return fmt.Errorf("round %d: rank %d's chunk is wrong", round, p)
				}
			}
		}
		return ag.Destroy(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
