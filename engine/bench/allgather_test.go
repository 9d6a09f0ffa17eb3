package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
	"github.com/luacoll/luacoll/window"
)

// TestBenchAllGatherHost: the all-gather benchmark runs on 2 host ranks
// (goroutines of this process), validates every chunk, and refuses the
// NCCL baseline off CUDA with a clear reason.
func TestBenchAllGatherHost(t *testing.T) {
	const n = 2
	results := make([]*AGBenchResult, n)
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		var err error
		results[r], err = BenchAllGather(context.Background(), c, AGBenchConfig{Sizes: []uint64{1 << 10, 1000, 64 << 10},
			Iters: 3, Warmup: 1, Algo: "auto", NCCL: true})
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	res := results[0]
	if len(res.Rows) != 3 || res.HaveNCCL || res.NCCL != "NCCL baseline needs --device cuda" {
		t.Fatalf("result %+v", res)
	}
	for _, row := range res.Rows {
		if row.Wrong != 0 || row.Seconds <= 0 || row.Bytes%(16*n) != 0 {
			t.Fatalf("row %+v", row)
		}
	}
	if res.Rows[1].Bytes != 992 { // 1000/2 rounded down to 16, times 2
		t.Fatalf("size 1000 gives %d bytes", res.Rows[1].Bytes)
	}
}

// TestBenchAllGatherRowsAsMeasured: OnRow sees each size's row before the
// next size is measured, so when a later size fails the rows finished
// before it have been handed out (and printed, by the command).
func TestBenchAllGatherRowsAsMeasured(t *testing.T) {
	const n = 2
	sizes := []uint64{1 << 10, 4 << 10, 16 << 10}
	var seen []uint64
	var measured []uint64 // sizes the schedule was called for on rank 0, in order
	errs := enginetest.WithComms(t, n, engine.Options{Device: "host", Timeout: 10 * time.Second}, func(r int, c *engine.Comm) error {
		sched := func(w *window.Window, src *window.Buffer, chunk, _ uint64) (int, error) {
			if chunk*n == sizes[2] {
				return 0, errors.New("size 3 breaks")
			}
			if r == 0 && (len(measured) == 0 || measured[len(measured)-1] != chunk*n) {
				measured = append(measured, chunk*n)
				if len(seen) != len(measured)-1 {
					return 0, fmt.Errorf("size %d measured with %d rows handed out", chunk*n, len(seen))
				}
			}
			for p := 0; p < n; p++ {
				if err := w.Put(window.Transfer{Peer: p, PeerOff: uint64(r) * chunk, Local: src, N: chunk}); err != nil {
					return 0, err
				}
			}
			return 1, w.Barrier(0)
		}
		_, err := BenchAllGather(context.Background(), c, AGBenchConfig{Sizes: sizes, Iters: 2, Warmup: 1, Algo: "lua:test",
			Schedule: sched, ScheduleName: "test",
			OnRow: func(res *AGBenchResult, row AGBenchRow) error {
				if r != 0 {
					return errors.New("OnRow called off rank 0")
				}
				if res.Info["algo"] != "test" || len(res.Rows) != len(seen)+1 {
					return fmt.Errorf("OnRow with info %v and %d rows", res.Info, len(res.Rows))
				}
				seen = append(seen, row.Bytes)
				return nil
			}})
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "size 3 breaks") {
			t.Errorf("rank %d: %v, want the third size's error", r, err)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(sizes[:2]) {
		t.Errorf("rows handed out before the failure: %v, want %v", seen, sizes[:2])
	}
}
