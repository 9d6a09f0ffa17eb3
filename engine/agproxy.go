package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
	tcuda "github.com/luacoll/luacoll/transport/cuda"
	"github.com/luacoll/luacoll/transport/shm"
	"github.com/luacoll/luacoll/window"
)

// Graph mode on the proxy path (CUDA windows whose peers include network
// ones, which the host drives): an exec is one host function on the rank's
// CUDA stream, captured once into a CUDA graph (one host node) and
// replayed by every later exec with the same arguments. The host function
// runs the exec's window operations (execWindow) on a view of the window
// bound to a host stream, which reaches the window's host memory directly
// and the network through UCX, then syncs that stream; a failure becomes
// the CUDA stream's, reported by the next sync. Replays run in stream
// order, one at a time, so the exec state they advance (hx) is theirs
// alone.
type agProxyGraph struct {
	cs  *tcuda.CUDAStream
	hx  *AllGather // the state the host function advances: ag's, on the view
	hs  transport.Stream
	fn  *cuda.HostFunc
	g   *tcuda.CUDAGraph
	arg agProxyArgs // the captured exec's arguments
	// done counts the execs the host function finished (Info's execs),
	// launched those enqueued (Execs).
	done     atomic.Uint64
	launched uint64
}

type agProxyArgs struct {
	src          *window.Buffer
	srcOff, n    uint64
	inPlace, set bool
}

// openProxyGraph prepares graph mode on the proxy path (not collective:
// nothing is shared before the first exec).
func (ag *AllGather) openProxyGraph(cs *tcuda.CUDAStream) error {
	hb := shm.NewHostBackend(ag.c.Env.JobID)
	hs, err := hb.NewStream(ag.c.Abort)
	if err != nil {
		return err
	}
	if u, ok := hs.(transport.NetworkUser); ok && ag.c.Rank.Net != nil {
		u.UseNetwork(ag.c.Rank.Net)
	}
	hx := *ag
	hx.w = ag.w.OnStream(hs, hb)
	pg := &agProxyGraph{cs: cs, hx: &hx, hs: hs}
	pg.fn = cuda.NewHostFunc(pg.run)
	ag.pg = pg
	return nil
}

// run is the host function: one exec of the captured arguments.
func (pg *agProxyGraph) run() {
	a := pg.arg
	err := pg.hx.execWindow(a.src, a.srcOff, a.n, a.inPlace)
	if err == nil {
		err = pg.hs.Sync(context.Background())
	}
	pg.done.Add(1)
	if err != nil {
		pg.cs.Fail(fmt.Errorf("graph replay of exec #%d (host function): %w", pg.hx.k, err))
	}
}

// execProxyGraph enqueues one exec: a replay of the graph, captured first
// (again when the arguments changed, once the stream has drained).
func (ag *AllGather) execProxyGraph(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
	pg := ag.pg
	a := agProxyArgs{src: src, srcOff: srcOff, n: n, inPlace: inPlace, set: true}
	if pg.g == nil || pg.arg != a {
		if pg.g != nil {
			if err := pg.cs.Sync(context.Background()); err != nil {
				return ag.errf("graph: the replays before new arguments failed: %w", err)
			}
			_ = pg.g.Destroy()
			pg.g = nil
		}
		pg.arg = a
		g, err := pg.cs.Capture(func(raw *cuda.Stream) error { return raw.LaunchHostFunc(pg.fn) })
		if err != nil {
			return ag.errf("graph: %w", err)
		}
		pg.g = g
	}
	pg.g.Launch()
	pg.launched++
	return nil
}

// close releases the graph, the host function and the host stream; the
// CUDA stream has drained.
func (pg *agProxyGraph) close() {
	if pg.g != nil {
		_ = pg.g.Destroy()
		pg.g = nil
	}
	pg.fn.Free()
	pg.hs.Close()
}
