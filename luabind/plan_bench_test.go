package luabind

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/allgather"
	"github.com/luacoll/luacoll/engine/bench"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/transport/inproc"
	"github.com/luacoll/luacoll/window"
)

// BenchmarkPlanVsBuiltin: 4 ranks of this process on the host backend run
// a plan of lib/allgather.lua's schedule (what bench allgather --plan
// replays) and the built-in direct all-gather on the same window and
// source, alternating blocks of execs so that both see the same machine;
// it reports both times per exec and their ratio (built-in over plan:
// above 1, the plan is faster). b.N counts pairs of blocks.
func BenchmarkPlanVsBuiltin(b *testing.B) {
	for _, algo := range []string{"direct", "ring"} {
		for _, size := range []uint64{1 << 10, 64 << 20} {
			b.Run(fmt.Sprintf("%s/%d", algo, size), func(b *testing.B) { benchPlanVsBuiltin(b, algo, size) })
		}
	}
}

func benchPlanVsBuiltin(b *testing.B, algo string, size uint64) {
	const ranks = 4
	n := size / ranks
	execs := 200
	if n >= 1<<20 {
		execs = 4
	}
	g := inproc.NewGroup(ranks)
	job := fmt.Sprintf("pb%d", time.Now().UnixNano())
	var planT, builtT [ranks]time.Duration
	errs := make([]error, ranks)
	blocks := b.N
	b.ResetTimer()
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				c, err := enginetest.OpenInProc(ctx, g, r, job, engine.Options{Timeout: time.Minute})
				if err != nil {
					return err
				}
				defer c.Close(nil)
				s := New(c, io.Discard)
				defer s.Close()
				s.Ctx = ctx
				// Room to stage small chunks, as bench allgather gives.
				staging := uint64(0)
				if n <= bench.ScheduleStageMax {
					staging = size
				}
				w, err := c.NewWindow(ctx, "bench", window.Options{Bytes: size + 2*staging, Signals: 2, Counters: 1, Barriers: 2})
				if err != nil {
					return err
				}
				src, err := c.NewBuffer(n)
				if err != nil {
					return err
				}
				plan, err := s.SchedulePlan("allgather", algo)
				if err != nil {
					return err
				}
				ag, err := allgather.New(ctx, c, w, "direct", false)
				if err != nil {
					return err
				}
				defer ag.Destroy(ctx)
				block := func(op func() error) (time.Duration, error) {
					if err := c.Barrier(ctx); err != nil {
						return 0, err
					}
					t0 := time.Now()
					for i := 0; i < execs; i++ {
						if err := op(); err != nil {
							return 0, err
						}
					}
					err := c.Sync(ctx)
					return time.Since(t0), err
				}
				perCall := 1
				planOp := func() error {
					k, err := plan(w, src, n, staging)
					perCall = k
					return err
				}
				builtOp := func() error { return ag.Exec(ctx, src, 0, n) }
				// warm up both (the plan is recorded and verified here)
				if _, err := block(planOp); err != nil {
					return err
				}
				if _, err := block(builtOp); err != nil {
					return err
				}
				for i := 0; i < blocks; i++ {
					d, err := block(planOp)
					if err != nil {
						return err
					}
					planT[r] += d / time.Duration(perCall)
					if d, err = block(builtOp); err != nil {
						return err
					}
					builtT[r] += d
				}
				return nil
			}()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	per := float64(blocks * execs)
	p, bi := planT[0].Seconds()/per*1e6, builtT[0].Seconds()/per*1e6
	b.ReportMetric(p, "plan_us/exec")
	b.ReportMetric(bi, "builtin_us/exec")
	b.ReportMetric(bi/p, "builtin/plan")
}
