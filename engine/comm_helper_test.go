package engine

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// withComms opens an n-rank job whose ranks are goroutines of this process
// (a real bootstrap over loopback TCP), runs body on each rank's Comm, and
// closes it. It returns each rank's error: from opening, from body, or
// from closing.
func withComms(t testing.TB, n int, opts Options, body func(r int, c *Comm) error) []error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := transport.LocalIdentity("").Host
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
			c, err := OpenWith(ctx, env, opts, boot, abort, nil)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = body(r, c)
			if cerr := c.Close(errs[r]); errs[r] == nil {
				errs[r] = cerr
			}
		}()
	}
	wg.Wait()
	return errs
}
