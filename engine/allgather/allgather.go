package allgather

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/luacoll/luacoll/engine"
	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/window"
)

// A Persistent owns two slots of its window for as long as it lives: the
// window's last signal slot and its last barrier slot, reserved on the
// Comm (engine.Comm.ReserveSlots; the Lua API refuses a script's own
// signals, waits, barriers and inbox resets there while it lives), and a
// window holds at most one at a time.
//
// Protocol of exec k (k counts the execs of the window's all-gathers):
//
//  1. a window barrier on the last barrier slot, so no rank writes exec k's
//     data into a peer that may still read exec k-1's result;
//  2. the own chunk is copied into place (skipped when in place);
//  3. the own chunk is put into every peer at rank*n, peers in the order
//     rank+1, rank+2, ... (no incast), each put followed by a "set" of the
//     last signal slot to tag(k, n) = (k mod 2^23) << 41 | n;
//  4. for every peer, a wait until that peer's slot equals tag(k, n).
//
// Because the tag carries n, a rank that passes a different n than its
// peers never satisfies their wait: the wait fails as soon as it sees the
// peer's tag for exec k with another n, with an error naming both sizes
// (the cross-rank n check costs nothing on the fast path). A peer that
// never gets that far is reported at the window timeout: one that has not
// reached exec k, or, on CUDA path sm, one whose n picks another of the
// path's protocols (flagged lines up to 64 KiB per rank, one kernel above),
// which never writes what this rank waits for. The barrier guarantees a peer's slot still holds
// tag(k-1, ...) until this rank reaches exec k, so the equality wait is safe
// back to back.
const (
	tagNBits = 41 // window.MaxBytes is 2^40, so n fits
	tagNMask = 1<<tagNBits - 1
	tagKMask = 1<<(64-tagNBits) - 1
)

func agTag(k, n uint64) uint64 { return (k&tagKMask)<<tagNBits | n&tagNMask }

// agRefusedN is the n a refused exec announces (RefuseExec): beyond any
// window (window.MaxBytes is 2^40), so no peer's n ever matches it.
const agRefusedN = tagNMask

// Persistent is a prepared persistent all-gather over one window.
type Persistent struct {
	c         *engine.Comm
	w         *window.Window
	me, size  int                 // this rank's number, the job's ranks
	res       *engine.Reservation // the window's slots sig and bar
	algo      string              // requested
	run       string              // algorithm that runs
	graph     bool
	note      string
	path      string
	sig       int
	bar       int
	k         uint64 // execs so far (continues the window's count)
	inbox     []transport.Addr
	destroyed bool
	// On CUDA: the device-side protocol (exec counter in device memory,
	// one-thread ready/done kernels, copy-engine copies, graphs) and the
	// private window holding its slots.
	dev   *gpu.CUDAAGP
	syncw *window.Window
	// On the host: the protocol's addresses (host.go); syncw is its
	// private window.
	host *agHost
	// On the window's operations (sched.go): the nodes.
	layout agLayout
	// msgs is the scale of n in the tags of the window operations
	// (sched.go, agMsgTag): more than the messages any sender sends a
	// receiver in one exec.
	msgs uint64
	// directUpTo: execs of at most this many bytes per rank run direct
	// (auto's choice on several nodes: measured in
	// docs/results/allgather-nodes.md); 0: none.
	directUpTo uint64
	// stageHier: staged execs run two levels (execStagedHier), auto's
	// choice on the proxy path with several ranks a node; ringFrom:
	// execs of at least this many bytes per rank run ring (0: none).
	stageHier bool
	ringFrom  uint64
	// proxy: CUDA windows whose network operations the host runs; pg is
	// graph mode there (proxy.go).
	proxy bool
	pg    *agProxyGraph
	// stage is the staged protocol's window (stage.go), for execs of at
	// most stageMax bytes per rank that run direct; nil: none.
	stage    *window.Window
	stageMax uint64
	// stageIn[slot][p] lists p's slot of this rank's staging window,
	// stageBell is this rank's bell there, stageDescribe its waits' errors
	// (made once: a wait allocates nothing).
	stageIn       [stageSlots][][]transport.Addr
	stageFwd      []func(want, obs uint64) bool // per local rank: stagehier.go's fwdMismatch
	stageBell     transport.Addr
	stageDescribe func(transport.WaitSpec, uint64, error) error
}

// agHierDirectUpTo is where auto switches from direct to hier on a job of
// several nodes: direct took less time up to 64 KiB per rank on 2 x 2 and
// 2 x 4 ranks, hier from 1 MiB.
const agHierDirectUpTo = 256 << 10

// agProxyRingFrom is where auto switches from hier to ring on the CUDA
// proxy path with several ranks a node: on 2 logical nodes x 2 GPUs ring
// took less time than hier from 2 MiB per rank, eager and graph; at 1 MiB
// the two were within each other's spread from call to call, hier's the
// narrower (docs/results/allgather-auto.md, "Two GPUs a node: the
// algorithms side by side" and "2 x 2 at 1-32 MiB, ring against hier").
const agProxyRingFrom = 2 << 20

// New is collective: every rank must pass the same window, algo
// and graph. algo is "auto", "direct", "ring" or "hier" ("pipeline" is
// hier); graph mode needs the CUDA device.
func New(ctx context.Context, c *engine.Comm, w *window.Window, algo string, graph bool) (*Persistent, error) {
	if w == nil {
		return nil, &window.ArgError{Arg: "window", Msg: "a window is required"}
	}
	call := fmt.Sprintf("allgather_persistent{window=%d, algo=%q, graph=%v}", w.ID(), algo, graph)
	ag := &Persistent{c: c, w: w, algo: algo, graph: graph, me: c.RankID()}
	if c.Rank != nil {
		ag.size = c.Rank.N()
	}
	status := ag.prepare()
	// Quiesce this rank's stream: after the collective no all-gather writes
	// of an earlier all-gather on this window are in flight anywhere.
	if status == nil {
		if err := c.Sync(ctx); err != nil {
			status = fmt.Errorf("pending operations failed: %w", err)
		}
	}
	msg := ""
	if status != nil {
		msg = status.Error()
	}
	all, err := c.Collective(ctx, call, []byte(msg))
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", ag.me, err)
	}
	if status != nil {
		return nil, status
	}
	var others []string
	for r, d := range all {
		if len(d) > 0 {
			others = append(others, fmt.Sprintf("rank %d: %s", r, d))
		}
	}
	if len(others) > 0 {
		return nil, fmt.Errorf("rank %d: %s failed on other ranks: %s", ag.me, call, strings.Join(others, "; "))
	}
	me, n := ag.me, ag.size
	if cs, ok := c.Rank.Stream.(gpu.AGPStream); ok && !ag.proxy {
		if err := ag.openDevice(ctx, cs, call); err != nil {
			return nil, err
		}
	} else if ag.run == "direct" && (ag.c.Rank.Topo == nil || !ag.c.Rank.Topo.AnyNet()) {
		// The host protocol needs every peer mapped; in a job with
		// network peers (the whole matrix says so, so every rank
		// decides alike), and for ring and hier, the all-gather runs
		// on the window's operations (execWindow).
		if err := ag.openHost(ctx, call); err != nil {
			return nil, err
		}
	} else if (!ag.graph || ag.proxy) && (ag.run == "direct" || ag.directUpTo > 0 || ag.stageHier) {
		// Window operations (network peers, the proxy path, whose graph
		// mode runs them in a host function too): small direct execs
		// are staged, with no guard barrier. Every rank decides alike
		// (the topology's whole matrix, the collective arguments).
		if err := ag.openStage(ctx, call); err != nil {
			return nil, err
		}
	}
	// Continue the window's exec count where an earlier all-gather left it:
	// every algorithm leaves tag(k, n) in the rows this rank received from
	// at the last exec, so every rank finds the same k.
	for i := 1; i < n; i++ {
		p := (me + i) % n
		v, err := w.ReadSignalFrom(p, ag.sig)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %s: %w", me, call, err)
		}
		if k := v >> tagNBits; k > ag.k {
			ag.k = k
		}
	}
	if cs, ok := c.Rank.Stream.(gpu.ProxyStream); ok && ag.proxy && ag.graph {
		// After the exec count: the host function's state starts there.
		if err := ag.openProxyGraph(cs); err != nil {
			return nil, fmt.Errorf("rank %d: %s: graph mode: %w", me, call, err)
		}
	}
	res, err := c.ReserveSlots(w, ag.sig, ag.bar)
	if err != nil {
		if ag.pg != nil {
			ag.pg.close(true)
		}
		return nil, fmt.Errorf("rank %d: %s: window %d already has a persistent all-gather; destroy it first", me, call, w.ID())
	}
	ag.res = res
	return ag, nil
}

// prepare validates the arguments and the window on this rank.
func (ag *Persistent) prepare() error {
	w, c := ag.w, ag.c
	switch ag.algo {
	case "auto", "direct", "ring", "hier":
		ag.run = ag.algo
	case "pipeline":
		ag.run = "hier"
	default:
		return &window.ArgError{Arg: "algo", Msg: fmt.Sprintf("unknown algorithm %q (want auto, direct, ring or hier)", ag.algo)}
	}
	if ag.graph && c.Opts.Device != "cuda" {
		return &window.ArgError{Arg: "graph", Msg: "graph mode needs --device cuda"}
	}
	// CUDA windows with network peers live in host memory the GPU maps,
	// and the host runs their network operations (the proxy path): the
	// all-gather runs on window operations there, as on the host.
	ag.proxy = c.Opts.Device == "cuda" && c.Rank.Topo != nil && c.Rank.Topo.AnyNet()
	layout, lerr := nodeGroups(c.Rank.Topo, ag.size, ag.me)
	ag.layout = layout
	if ag.run == "auto" {
		// hier where there are nodes to bridge and ranks to forward to,
		// except for small execs, direct otherwise.
		ag.run = "direct"
		if lerr == nil && len(layout.groups) > 1 && len(layout.groups[0]) > 1 {
			ag.run, ag.directUpTo, ag.stageHier = "hier", agHierDirectUpTo, true
			if ag.proxy {
				ag.directUpTo, ag.ringFrom = 0, agProxyRingFrom
			}
		}
	}
	if ag.run == "hier" && lerr != nil {
		return &window.ArgError{Arg: "algo", Msg: lerr.Error()}
	}
	if ag.run != "direct" && c.Opts.Device == "cuda" && !ag.proxy {
		// The device protocol is direct; ring and hier run on window
		// operations, which CUDA windows drive from the host.
		if ag.algo != "auto" {
			ag.note = ag.run + " runs on host windows; the CUDA protocol runs direct"
		}
		ag.run = "direct"
	}
	ag.msgs = uint64(max(ag.size, 8*len(layout.groups), 1))
	if share := w.Options().Bytes / uint64(max(ag.size, 1)); (share+1)*ag.msgs >= agRefusedN {
		return &window.ArgError{Arg: "window", Msg: fmt.Sprintf("%d bytes a rank are too many for the all-gather's signal tags at %d ranks on %d nodes (at most %d)",
			share, ag.size, len(layout.groups), agRefusedN/ag.msgs-1)}
	}
	if w.Freed() {
		return &window.ErrFreed{What: fmt.Sprintf("window %d", w.ID())}
	}
	o := w.Options()
	ag.sig, ag.bar = o.Signals-1, o.Barriers-1
	if c.Reserved(w) {
		return fmt.Errorf("window %d already has a persistent all-gather; destroy it first", w.ID())
	}
	me, n := ag.me, ag.size
	kinds := map[string]bool{}
	ag.inbox = make([]transport.Addr, n)
	for p := 0; p < n; p++ {
		ag.inbox[p] = w.Raw().LocalSignal(p, ag.sig)
		if p == me {
			continue
		}
		kind, err := w.Transport(p)
		if err != nil {
			return err
		}
		kinds[kind] = true
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	ag.path = strings.Join(ks, "+")
	if ag.path == "" {
		ag.path = "self"
	}
	switch {
	case ag.proxy:
		ag.path = "window operations, network ones run by the host (proxy), over " + ag.path
	case c.Opts.Device != "cuda":
		ag.path = "host copy over " + ag.path
	}
	return nil
}

func (ag *Persistent) errf(format string, a ...any) error {
	return fmt.Errorf("rank %d: allgather_persistent on window %d: "+format, append([]any{ag.me, ag.w.ID()}, a...)...)
}

func (ag *Persistent) live() error {
	if ag.destroyed {
		return ag.errf("used after destroy")
	}
	if ag.w.Freed() {
		return ag.errf("window %d has been freed", ag.w.ID())
	}
	return nil
}

// Exec enqueues the gather of n bytes at srcOff of src from every rank into
// every rank's window at rank*n. src may be the window's buffer at rank*n
// (in place). Every argument is checked before anything is enqueued; a
// rank passing a different n than its peers fails their waits as soon as
// its tag arrives, with an error naming both sizes.
func (ag *Persistent) Exec(ctx context.Context, src *window.Buffer, srcOff, n uint64) error {
	if !ag.c.Tracing() {
		return ag.exec(src, srcOff, n)
	}
	start := time.Now()
	err := ag.exec(src, srcOff, n)
	if err == nil {
		ag.c.TraceOp(window.Op{Name: "allgather", Window: ag.w.ID(), Peer: -1, Ctr: -1, Bytes: n, Enqueued: start})
	}
	return err
}

// exec is Exec without the trace.
func (ag *Persistent) exec(src *window.Buffer, srcOff, n uint64) error {
	if err := ag.live(); err != nil {
		return err
	}
	w := ag.w
	me, size := ag.me, uint64(ag.size)
	bytes := w.Options().Bytes
	if n > bytes/size {
		return &window.ArgError{Arg: "n", Msg: fmt.Sprintf("%d bytes from each of %d ranks do not fit window %d (%d bytes)", n, size, w.ID(), bytes)}
	}
	if src == nil {
		return &window.ArgError{Arg: "src", Msg: "a buffer or window is required"}
	}
	if src.Freed() {
		return &window.ArgError{Arg: "src", Msg: src.Name() + " has been freed"}
	}
	if srcOff > src.Size() {
		return &window.ArgError{Arg: "src_off", Msg: fmt.Sprintf("offset %d is past the end of %s (%d bytes)", srcOff, src.Name(), src.Size())}
	}
	if n > src.Size()-srcOff {
		return &window.ArgError{Arg: "n", Msg: fmt.Sprintf("%d bytes at offset %d run past the end of %s (%d bytes)", n, srcOff, src.Name(), src.Size())}
	}
	own := uint64(me) * n
	inPlace := src == w.Buffer() && srcOff == own
	if src == w.Buffer() && !inPlace && n > 0 && srcOff < size*n {
		return &window.ArgError{Arg: "src_off", Msg: fmt.Sprintf("the window as source must be at offset rank*n = %d (in place) or past the gathered area (%d bytes)", own, size*n)}
	}
	if ag.dev != nil {
		return ag.execDevice(src, srcOff, n, inPlace)
	}
	if ag.pg != nil {
		return ag.execProxyGraph(src, srcOff, n, inPlace)
	}
	if ag.host == nil {
		return ag.execWindow(src, srcOff, n, inPlace)
	}
	from := w.Buffer()
	if !inPlace {
		from = src
	}
	addr, err := from.Addr()
	if err != nil {
		return ag.errf("src: %w", err)
	}
	if inPlace {
		srcOff = own
	}
	ag.execHost(addr.Add(srcOff), n, inPlace)
	return nil
}

// Execs is the number of execs this rank has enqueued, refused ones
// included.
func (ag *Persistent) Execs() uint64 {
	if ag.dev != nil {
		return ag.dev.Count()
	}
	if ag.pg != nil {
		return ag.pg.launched
	}
	return ag.k
}

// RefuseExec takes part in an exec that this rank refused (its arguments
// failed their checks): the exec is counted, so later ones stay in step,
// and the peers' waits for this rank's chunk fail as soon as its tag
// arrives, saying that this rank refused it, instead of timing out. It
// moves no data and waits for nothing on the host; on CUDA the exec runs
// its handshakes with the refused mark and no copies (peers on path sm's
// one-launch protocols see no tag and fail at the window timeout). A
// destroyed all-gather or a freed window has nothing to take part in.
func (ag *Persistent) RefuseExec() error {
	if ag.live() != nil {
		return nil
	}
	if ag.dev != nil {
		e := gpu.AGPExec{N: agRefusedN, Fail: func(phase string, k, obs uint64, cause error) error {
			return ag.errf("exec #%d: refused on this rank, the peers' chunks were not taken (%s)", k, ag.failWhat(cause))
		}}
		if err := ag.dev.Exec(e); err != nil {
			return ag.errf("refused exec #%d: %w", ag.dev.Count()+1, err)
		}
		return nil
	}
	if ag.host != nil {
		ag.refuseHost()
		return nil
	}
	if ag.pg != nil {
		// The exec state is the host function's: the refusal runs there
		// too, in stream order.
		ag.pg.refuse()
		return nil
	}
	if ag.stage != nil && (ag.k+1)&tagKMask != 0 {
		return ag.refuseStaged()
	}
	w, me, size := ag.w, ag.me, ag.size
	if err := ag.nextExec(); err != nil {
		return err
	}
	sig := window.Sig{ID: ag.sig, Value: agTag(ag.k, agRefusedN), Op: window.SigSet}
	for i := 1; i < size; i++ {
		p := (me + i) % size
		if err := w.Signal(p, sig); err != nil {
			return ag.errf("refused exec #%d: telling rank %d: %w", ag.k, p, err)
		}
	}
	return nil
}

func (ag *Persistent) waitError(p int, k, n, obs uint64, cause error) error {
	what := ag.failWhat(cause)
	if obs>>tagNBits == k&tagKMask && obs&tagNMask == agRefusedN {
		return ag.errf("exec #%d: rank %d refused it (that rank's error says why)", k, p)
	}
	if obs>>tagNBits == k&tagKMask && obs&tagNMask != n {
		return ag.errf("exec #%d: n differs across ranks: rank %d passed n=%d, this rank n=%d (%s)", k, p, obs&tagNMask, n, what)
	}
	return ag.errf("exec #%d: waiting for rank %d's chunk (n=%d): %s", k, p, n, what)
}

// failWhat says how a wait of the protocol ended: seen at once (a peer's
// tag for the same exec with another n), timed out, or aborted.
func (ag *Persistent) failWhat(cause error) string {
	switch {
	case errors.Is(cause, transport.ErrMismatch):
		return "seen as soon as that rank's tag arrived"
	case errors.Is(cause, transport.ErrTimeout):
		if h := transport.HintOf(cause); h != "" {
			return "timed out after " + ag.w.Options().Timeout.String() + " (" + h + ")"
		}
		return "timed out after " + ag.w.Options().Timeout.String()
	}
	return "aborted: " + cause.Error()
}

// Destroyed reports whether Destroy was called.
func (ag *Persistent) Destroyed() bool { return ag.destroyed }

// Protocol names how an exec of n bytes per rank moves its data: on CUDA
// the device protocol ("lines", "staged", "kernel", "ce+kernel" or "ce";
// transport/gpu's Protocol), "proxy" where the host drives the
// network in graph mode, "host" on the host backend's direct copies,
// else the algorithm the window operations run ("direct", "ring", "hier",
// "staged" for staged direct execs, "staged-hier" for those staged in two
// levels).
func (ag *Persistent) Protocol(n uint64) string {
	switch {
	case ag.dev != nil:
		return ag.dev.Protocol(n)
	case ag.pg != nil:
		return "proxy"
	case ag.host != nil:
		return "host"
	case ag.staged(n) && ag.stageHier:
		return "staged-hier"
	case ag.staged(n):
		return "staged"
	}
	return ag.algoFor(n)
}

// algoFor is the algorithm an exec of n bytes per rank runs on window
// operations when it is not staged.
func (ag *Persistent) algoFor(n uint64) string {
	switch {
	case n <= ag.directUpTo:
		return "direct"
	case ag.ringFrom > 0 && n >= ag.ringFrom:
		return "ring"
	}
	return ag.run
}

// Info says what was requested and what actually runs: strings, except
// signal_slot and barrier_slot and execs (ints), graph (a bool).
func (ag *Persistent) Info() map[string]any {
	m := map[string]any{
		"algo_requested": ag.algo,
		"algo":           ag.run,
		"path":           ag.path,
		"graph":          false,
		"signal_slot":    ag.sig,
		"barrier_slot":   ag.bar,
		"nodes":          len(ag.layout.groups),
		"ranks_per_node": len(ag.layout.groups[0]),
	}
	if ag.directUpTo > 0 && ag.run != "direct" {
		m["direct_up_to"] = int(ag.directUpTo)
	}
	if ag.ringFrom > 0 {
		m["ring_from"] = int(ag.ringFrom)
	}
	if ag.stage != nil {
		m["staged_up_to"] = int(ag.stageMax)
		if ag.stageHier {
			m["staged"] = "two levels: counterparts on other nodes, then forwarded within the node"
		}
	}
	if ag.dev != nil {
		m["sync"] = "device exec counter, one-thread ready/done kernels"
		m["execs"] = int(ag.dev.Count())
		if ag.graph {
			m["graph"] = true
			if nodes := ag.dev.GraphNodes(); nodes != nil {
				m["graph_nodes"] = gpu.NodesString(nodes)
			} else {
				m["graph_nodes"] = "not captured yet (the first exec captures)"
			}
		}
	}
	if pg := ag.pg; pg != nil {
		m["sync"] = "a host function per exec (the host drives the network: proxy path)"
		m["execs"] = int(pg.done.Load())
		m["graph"] = true
		m["graph_nodes"] = "not captured yet (the first exec captures)"
		if pg.g != nil {
			m["graph_nodes"] = gpu.NodesString(pg.g.Nodes())
		}
	}
	if ag.note != "" {
		m["note"] = ag.note
	}
	if ag.destroyed {
		m["state"] = "destroyed"
	} else {
		m["state"] = "ready"
	}
	return m
}

// Destroy is collective: it waits for this rank's stream, meets every rank
// and releases the window's slots; any later use is an error.
func (ag *Persistent) Destroy(ctx context.Context) error {
	if ag.destroyed {
		return ag.errf("destroyed twice")
	}
	call := fmt.Sprintf("allgather_persistent(window=%d):destroy()", ag.w.ID())
	ctx = bootstrap.WithCallTimeoutAtLeast(ctx, ag.w.Options().Timeout)
	serr := ag.c.Sync(ctx)
	_, cerr := ag.c.Collective(ctx, call, nil)
	ag.destroyed = true
	if ag.pg != nil {
		ag.pg.close(serr == nil)
		ag.pg = nil
	}
	if ag.dev != nil {
		if err := ag.dev.Close(); err != nil && serr == nil {
			serr = err
		}
		ag.dev = nil
	}
	if ag.syncw != nil && cerr == nil {
		cerr = ag.c.FreeWindow(ctx, ag.syncw)
		ag.syncw = nil
	}
	if ag.stage != nil && cerr == nil {
		cerr = ag.c.FreeWindow(ctx, ag.stage)
		ag.stage = nil
	}
	if ag.res != nil {
		ag.res.Release()
	}
	if cerr != nil {
		return ag.errf("destroy: %w", cerr)
	}
	if serr != nil {
		return ag.errf("destroy: pending operations failed: %w", serr)
	}
	return nil
}
