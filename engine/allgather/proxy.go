package allgather

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/shm"
	"github.com/luacoll/luacoll/window"
)

// Graph mode on the proxy path (CUDA windows whose peers include network
// ones, which the host drives): an exec is one call into a host thread on
// the rank's CUDA stream (gpu.ProxyCall: a kernel rings a host-mapped
// bell and waits for the answer), captured once into a CUDA graph and
// replayed by every later exec with the same arguments. The thread (serve)
// runs each call's exec, the window operations of execWindow, on a view
// of the window bound to a host stream, which reaches the window's host
// memory directly and the network through UCX, then syncs that stream and
// answers; a failure becomes the CUDA stream's, reported by the next sync.
// Calls are answered in order, one at a time, so the exec state they
// advance (hx) is theirs alone. (A host node in the graph did the same:
// 95-112 us a 1 KiB exec across two nodes, 37-54 us with the call.)
type agProxyGraph struct {
	cs   gpu.ProxyStream
	hx   *Persistent // the state the calls advance: ag's, on the view
	hs   transport.Stream
	call *gpu.ProxyCall
	// stop ends serve, which closes served when it returns.
	stop, served chan struct{}
	g            *gpu.CUDAGraph
	arg          agProxyArgs // the captured exec's arguments
	// failed: an exec failed, and the CUDA stream has not reported it
	// yet; until it has, later host functions do nothing (as a stream
	// skips what follows a failed operation until a sync reports it)
	// instead of each waiting out the window's timeout.
	failed atomic.Bool
	// skipping: hs holds errAgSkipped (the thread running execs only).
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
func (ag *Persistent) openProxyGraph(cs gpu.ProxyStream) error {
	hb := shm.NewHostBackend(ag.c.Env.JobID)
	hs, err := hb.NewStream(ag.c.Abort)
	if err != nil {
		return err
	}
	if u, ok := hs.(transport.NetworkUser); ok && ag.c.Rank.Net != nil {
		u.UseNetwork(ag.c.Rank.Net)
	}
	// The serve thread syncs the stream after every exec: its operations
	// run on that thread, with no hand-off to the stream's goroutine.
	if st, ok := hs.(transport.CallerSettler); ok {
		st.SettleOnCaller()
	}
	hx := *ag
	hx.w = ag.w.Raw().OnStream(hs, hb)
	if ag.stage != nil {
		hx.stage = ag.stage.Raw().OnStream(hs, hb)
		hx.stageDescribe = (&hx).describeHostWait
	}
	// The call gives up well after the exec's own waits would have.
	timeout := time.Duration(0)
	if t := ag.w.Options().Timeout; t > 0 {
		timeout = 2*t + 10*time.Second
	}
	call, err := cs.NewProxyCall(timeout)
	if err != nil {
		hs.Close()
		return err
	}
	pg := &agProxyGraph{cs: cs, hx: &hx, hs: hs, call: call, stop: make(chan struct{}), served: make(chan struct{})}
	// An interrupt of the rank's stream (Ctrl-C, a sync's deadline, the
	// stream closing) ends the waits of the exec in progress too.
	unInterrupt := cs.OnInterrupt(hs.Interrupt)
	unReport := cs.OnReport(func(error) { pg.failed.Store(false) })
	pg.unhook = func() { unInterrupt(); unReport() }
	ag.pg = pg
	go pg.serve()
	return nil
}

// serve answers the calls: it polls the bell and runs the exec of every
// call rung, in order. It spins while calls come (each one's answer is
// what the stream waits for), yields for a millisecond after the last,
// then polls every 50 us, and after 100 ms without a call every
// millisecond, until stop.
func (pg *agProxyGraph) serve() {
	defer close(pg.served)
	var answered uint64
	idle := time.Now()
	for i := 0; ; i++ {
		if e := pg.call.Rung(); e > answered {
			for answered < e {
				answered++
				pg.run()
				pg.call.Answer(answered)
			}
			idle, i = time.Now(), 0
			continue
		}
		if i&63 != 63 {
			continue
		}
		select {
		case <-pg.stop:
			return
		default:
		}
		switch since := time.Since(idle); {
		case since < time.Millisecond:
			runtime.Gosched()
		case since < 100*time.Millisecond:
			time.Sleep(50 * time.Microsecond)
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// run is one exec of the captured arguments.
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
// still enqueued (so the exec counts advance, as they do on a
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
	// The exec is over once its chunks arrived (its waits) and its puts
	// completed locally; the peers' waits see them arrive, so no flush.
	var serr error
	if ls, ok := pg.hs.(transport.LocalSyncer); ok {
		serr = ls.SyncLocal(context.Background())
	} else {
		serr = pg.hs.Sync(context.Background())
	}
	if err == nil {
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
// function.
func (pg *agProxyGraph) refuse() {
	pg.launched++
	pg.cs.HostOnce(func() { pg.step(pg.hx.RefuseExec, "refused exec") })
}

// execProxyGraph enqueues one exec: a replay of the graph, captured first
// (again when the arguments changed, once the stream has drained).
func (ag *Persistent) execProxyGraph(src *window.Buffer, srcOff, n uint64, inPlace bool) error {
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
		g, err := pg.cs.Capture(pg.call.Launch)
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
	if !drained {
		// serve goes on answering (the calls still queued end at once),
		// until the process ends.
		pg.failed.Store(true)
		pg.hs.Interrupt(errors.New("the all-gather was destroyed"))
		return
	}
	close(pg.stop)
	<-pg.served
	if pg.g != nil {
		_ = pg.g.Destroy()
		pg.g = nil
	}
	pg.call.Free()
	pg.hs.Close()
}
