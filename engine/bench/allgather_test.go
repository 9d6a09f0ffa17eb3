package bench

import (
	"context"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/enginetest"
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
