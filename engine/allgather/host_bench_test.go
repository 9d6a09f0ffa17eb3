package allgather_test

import (
	"context"
	"fmt"
	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/enginetest"
	"testing"
	"time"

	"github.com/luacoll/luacoll/window"
)

// BenchmarkAllGatherHost runs the host all-gather between two ranks that
// are goroutines of this process, 1 KiB in all per exec, synced every 100.
func BenchmarkAllGatherHost(b *testing.B) {
	for _, n := range []uint64{512, 64 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			errs := enginetest.WithComms(b, 2, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
				ctx := context.Background()
				w, err := c.NewWindow(ctx, "w", window.Options{Bytes: 2 * n, Signals: 2, Counters: 1, Barriers: 2})
				if err != nil {
					return err
				}
				src, err := c.NewBuffer(n)
				if err != nil {
					return err
				}
				ag, err := allgather.New(ctx, c, w, "auto", false)
				if err != nil {
					return err
				}
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if r == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if err := ag.Exec(ctx, src, 0, n); err != nil {
						return err
					}
					if i%100 == 99 {
						if err := c.Sync(ctx); err != nil {
							return err
						}
					}
				}
				if err := c.Sync(ctx); err != nil {
					return err
				}
				if r == 0 {
					b.StopTimer()
				}
				return ag.Destroy(ctx)
			})
			for r, err := range errs {
				if err != nil {
					b.Fatalf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// BenchmarkWindowBarrierHost: window barriers between ranks that are
// goroutines of this process, synced every 100.
func BenchmarkWindowBarrierHost(b *testing.B) {
	for _, ranks := range []int{2, 4} {
		b.Run(fmt.Sprint(ranks), func(b *testing.B) {
			errs := enginetest.WithComms(b, ranks, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
				ctx := context.Background()
				w, err := c.NewWindow(ctx, "w", window.Options{Bytes: 64, Signals: 1, Counters: 1, Barriers: 1})
				if err != nil {
					return err
				}
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if r == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if err := w.Barrier(0); err != nil {
						return err
					}
					if i%100 == 99 {
						if err := c.Sync(ctx); err != nil {
							return err
						}
					}
				}
				if err := c.Sync(ctx); err != nil {
					return err
				}
				if r == 0 {
					b.StopTimer()
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					b.Fatalf("rank %d: %v", r, err)
				}
			}
		})
	}
}
