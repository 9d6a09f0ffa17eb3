package enginetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/inproc"
)

// WithComms opens an n-rank job whose ranks are goroutines of this process
// (a real bootstrap over loopback TCP), runs body on each rank's Comm, and
// closes it. It returns each rank's error: from opening, from body, or
// from closing.
func WithComms(t testing.TB, n int, opts engine.Options, body func(r int, c *engine.Comm) error) []error {
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
			cfg := bootstrap.Config{Rank: r, Size: n, Addr: ln.Addr().String(), Timeout: 10 * time.Second, Abort: abort, Host: host}
			if r == 0 {
				cfg.Listener = ln
			}
			boot, err := bootstrap.Connect(ctx, cfg)
			if err != nil {
				errs[r] = err
				return
			}
			env := launch.RankEnv{Rank: r, Size: n, LocalRank: r, LocalSize: n, JobID: boot.JobID()}
			c, err := engine.OpenWith(ctx, env, opts, boot, abort, nil)
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

// JobID returns a fresh job id starting with prefix: the time and random
// bits, so that concurrent tests and test processes never share segments.
func JobID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%d-%x", prefix, time.Now().UnixNano(), b)
}

// OpenInProc opens rank's Comm of a job whose bootstrap is the in-process
// group g (every rank on one host, prefixed output).
func OpenInProc(ctx context.Context, g *inproc.Group, rank int, job string, opts engine.Options) (*engine.Comm, error) {
	n := g.Size()
	env := launch.RankEnv{Rank: rank, Size: n, LocalRank: rank, LocalSize: n, JobID: job, Prefixed: true}
	return engine.OpenWith(ctx, env, opts, g.Member(rank), transport.NewAbort(), nil)
}
