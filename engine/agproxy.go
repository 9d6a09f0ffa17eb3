package engine

import (
	"context"
	"errors"
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
	// failed: an exec failed, and the CUDA stream has not reported it
	// yet; until it has, later host functions do nothing (as a stream
	// skips what follows a failed operation until a sync reports it)
	// instead of each waiting out the window's timeout.
	failed atomic.Bool
	// skipping: hs holds errAgSkipped (driver thread only).
	skipping bool
	// unhook removes the forwarding of the CUDA stream's interrupts to hs
	// and its reports to failed.
	unhook func()
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
	// An interrupt of the rank's stream (Ctrl-C, a sync's deadline, the
	// stream closing) ends the waits of the exec in progress too.
	unInterrupt := cs.OnInterrupt(hs.Interrupt)
	unReport := cs.OnReport(func(error) { pg.failed.Store(false) })
	pg.unhook = func() { unInterrupt(); unReport() }
	ag.pg = pg
	return nil
}

// run is the host function: one exec of the captured arguments.
func (pg *agProxyGraph) run() {
	pg.step(func() error {
		a := pg.arg
		return pg.hx.execWindow(a.src, a.srcOff, a.n, a.inPlace)
	}, "exec")
	pg.done.Add(1)
}

// step runs one exec's (or refusal's) operations on the host stream and
// syncs it, on the driver's thread; a failure becomes the CUDA stream's.
// After a failure, until the CUDA stream reported it, the operations are
// still enqueued (so the exec counts and bases advance, as they do on a
// stream that skips what follows a failed operation) on a host stream
// left failed, which skips them.
func (pg *agProxyGraph) step(ops func() error, what string) {
	if pg.failed.Load() {
		if !pg.skipping {
			pg.hs.Host(func() error { return errAgSkipped })
			pg.skipping = true
		}
		_ = ops()
		return
	}
	if pg.skipping {
		_ = pg.hs.Sync(context.Background()) // errAgSkipped
		pg.skipping = false
	}
	err := ops()
	if serr := pg.hs.Sync(context.Background()); err == nil {
		err = serr
	}
	if err != nil {
		pg.failed.Store(true)
		pg.cs.Fail(fmt.Errorf("%s #%d (host function): %w", what, pg.hx.k, err))
	}
}

// errAgSkipped is what the host stream holds while execs are skipped.
var errAgSkipped = errors.New("skipped after a failed exec")

// refuse takes part in a refused exec in stream order: a one-off host
// function (freed by itself once it ran).
func (pg *agProxyGraph) refuse() {
	var f *cuda.HostFunc
	f = cuda.NewHostFunc(func() {
		pg.step(pg.hx.RefuseExec, "refused exec")
		f.Free()
	})
	pg.launched++
	pg.cs.HostFunc(f)
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

// close releases the graph, the host function and the host stream once
// the CUDA stream has drained (drained false: a sync failed, and a host
// function may still run: its waits are interrupted, later launches of it
// do nothing, and the host stream and graph are left to the process).
func (pg *agProxyGraph) close(drained bool) {
	pg.unhook()
	pg.fn.Free()
	if !drained {
		pg.failed.Store(true)
		pg.hs.Interrupt(errors.New("the all-gather was destroyed"))
		return
	}
	if pg.g != nil {
		_ = pg.g.Destroy()
		pg.g = nil
	}
	pg.hs.Close()
}
