package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The bootstrap at scale, simulated: n in-process ranks, each a real
// client of rank 0's hub over a Unix socket, speak the real wire protocol
// through the collectives a job makes to start and to make and free one
// window on the host backend, with payloads shaped like the engine's:
//
//   - start-up: connect (hello, accept, welcome with every rank's host),
//     the open check (the same call on every rank), the topology's
//     exchange of identities (host and device: the same on the ranks of
//     a host on the host backend), a barrier;
//   - one window: the window's check (the same call everywhere), the
//     memory's status exchange (empty on every rank), the free check.
//
// Ranks are grouped 8 to a host. It reports, besides ns/op, the cost per
// rank of each phase (start-ns/rank, window-ns/rank) and the bytes the
// hub wrote per rank in each (start-B/rank, window-B/rank). BOOTSTRAP_SCALE (comma-separated rank
// counts) picks the sizes; docs/results/bootstrap.md has the curve.
func BenchmarkBootstrapScale(b *testing.B) {
	sizes := []int{64, 256, 1024}
	if v := os.Getenv("BOOTSTRAP_SCALE"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("BOOTSTRAP_SCALE: %q", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			var sum simResult
			for range b.N {
				r := simulateJob(b, n)
				sum.start += r.start
				sum.window += r.window
				sum.startCPU += r.startCPU
				sum.windowCPU += r.windowCPU
				sum.startBytes += r.startBytes
				sum.windowBytes += r.windowBytes
			}
			per := float64(b.N) * float64(n)
			b.ReportMetric(float64(sum.start.Nanoseconds())/per, "start-ns/rank")
			b.ReportMetric(float64(sum.window.Nanoseconds())/per, "window-ns/rank")
			b.ReportMetric(float64(sum.startCPU.Nanoseconds())/per, "start-cpu-ns/rank")
			b.ReportMetric(float64(sum.windowCPU.Nanoseconds())/per, "window-cpu-ns/rank")
			b.ReportMetric(float64(sum.startBytes)/per, "start-B/rank")
			b.ReportMetric(float64(sum.windowBytes)/per, "window-B/rank")
		})
	}
}

// simResult is what one simulated job cost: how long the start-up and
// the window took (from the first rank's start to the last rank's end of
// each), the process's CPU time in each (what a loaded machine disturbs
// less), and the bytes the hub wrote in each.
type simResult struct {
	start, window           time.Duration
	startCPU, windowCPU     time.Duration // CPU time of the process (user and system)
	startBytes, windowBytes int64
}

// simulateJob runs one simulated job of n ranks.
func simulateJob(tb testing.TB, n int) (res simResult) {
	dir, err := os.MkdirTemp("", "lcboot")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ln, err := listenAddr(UnixPrefix + sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	boots := make([]*Bootstrap, n)
	errs := make([]error, n)
	host := func(r int) string {
		return fmt.Sprintf("node%05d.cluster.example:8c0f4e1a-5b7d-4c39-9a61-%012d", r/8, r/8)
	}
	run := func(phase func(r int) error, cpu *time.Duration) time.Duration {
		t0, c0 := time.Now(), cpuTime()
		defer func() {
			if cpu != nil {
				*cpu = cpuTime() - c0
			}
		}()
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := phase(r); err != nil && errs[r] == nil {
					errs[r] = err
				}
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				tb.Fatalf("rank %d of %d: %v", r, n, err)
			}
		}
		return time.Since(t0)
	}
	check := func(b *Bootstrap, call string, data []byte) error {
		msg := append([]byte(fmt.Sprintf("%08x\x00%04d%s", len(call), len(call), call)), data...)
		all, err := b.AllGather(ctx, msg)
		if err == nil && len(all) != n {
			err = fmt.Errorf("%s: %d entries", call, len(all))
		}
		return err
	}
	res.start = run(func(r int) error {
		cfg := Config{Rank: r, Size: n, Addr: UnixPrefix + sock, Timeout: 5 * time.Minute, Secret: "sim", Host: host(r)}
		if r == 0 {
			cfg.Listener = ln
		}
		b, err := Connect(ctx, cfg)
		if err != nil {
			return err
		}
		boots[r] = b
		if err := check(b, "open(device=host)", nil); err != nil {
			return err
		}
		id := fmt.Sprintf(`{"identity":{"host":%q,"device":"host","pid":0},"override":""}`, host(r))
		if _, err := b.AllGather(ctx, []byte(id)); err != nil {
			return err
		}
		return b.Barrier(ctx)
	}, &res.startCPU)
	res.startBytes = boots[0].hub.written()
	res.window = run(func(r int) error {
		b := boots[r]
		if err := check(b, "lc.window{bytes=1048576}", []byte{2}); err != nil {
			return err
		}
		if _, err := b.AllGather(ctx, []byte("{}")); err != nil {
			return err
		}
		return check(b, "window 0:free()", nil)
	}, &res.windowCPU)
	res.windowBytes = boots[0].hub.written() - res.startBytes
	run(func(r int) error {
		if r == 0 {
			return nil
		}
		return boots[r].Close()
	}, nil)
	if err := boots[0].Close(); err != nil {
		tb.Fatal(err)
	}
	return res
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// What the hub writes for a window (collectives every rank makes alike)
// does not grow with the ranks: one run per result, whatever their number.
func TestUniformCollectivesStayFlat(t *testing.T) {
	small, large := simulateJob(t, 8), simulateJob(t, 128)
	per := func(r simResult, n int) float64 { return float64(r.windowBytes) / float64(n) }
	if per(large, 128) > 1.2*per(small, 8) {
		t.Errorf("window: the hub wrote %.0f bytes per rank at 128 ranks, %.0f at 8", per(large, 128), per(small, 8))
	}
}
