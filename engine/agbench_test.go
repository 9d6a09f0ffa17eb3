package engine

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// TestBenchAllGatherHost: the all-gather benchmark runs on 2 host ranks
// (goroutines of this process), validates every chunk, and refuses the
// NCCL baseline off CUDA with a clear reason.
func TestBenchAllGatherHost(t *testing.T) {
	const n = 2
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := transport.LocalIdentity("").Host
	results := make([]*AGBenchResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			abort := transport.NewAbort()
			cfg := BootstrapConfig{Rank: r, Size: n, Addr: ln.Addr().String(), Timeout: 10 * time.Second, Abort: abort, Host: host}
			if r == 0 {
				cfg.Listener = ln
			}
			boot, err := Connect(ctx, cfg)
			if err != nil {
				errs[r] = err
				return
			}
			env := RankEnv{Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: boot.JobID()}
			c, err := OpenWith(ctx, env, Options{Device: "host", Timeout: 10 * time.Second}, boot, abort, nil)
			if err != nil {
				errs[r] = err
				return
			}
			results[r], errs[r] = BenchAllGather(ctx, c, AGBenchConfig{Sizes: []uint64{1 << 10, 1000, 64 << 10},
				Iters: 3, Warmup: 1, Algo: "auto", NCCL: true})
			if cerr := c.Close(errs[r]); errs[r] == nil {
				errs[r] = cerr
			}
		}()
	}
	wg.Wait()
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
