package window

import (
	"context"
	"fmt"

	"github.com/luacoll/luacoll/transport"
)

// Window is one rank's part of a collective window.
type Window struct {
	r    *Rank
	id   int
	opts Options
	lay  layout
	reg  *transport.Region
	// topo is how this window reaches its peers: the rank's topology,
	// with shm for the peers of this host where the window is host memory
	// a GPU maps (Region.HostShared).
	topo   *transport.Topology
	peers  *transport.Peers // the route to every peer's part
	buf    *Buffer
	freed  bool
	epoch  []uint64   // per window-barrier id
	pepoch [][]uint64 // per pairwise-barrier id, per peer
	// barSlots are the slots a window barrier waits on, per id (made at
	// its first use; never changed, so queued waits may share them), and
	// inSlots those of wait_signal, per signal.
	barSlots [][]transport.Addr
	inSlots  map[int][]transport.Addr
	oneSlots map[uint64][]transport.Addr
	// writers say which rank writes the slots of those waits (writers.go).
	writers waitWriters
	// describe is describeWait, made once: the errors of the waits.
	describe func(transport.WaitSpec, uint64, error) error
	// scratch stages reductions from network peers (reduce.go); nil until used.
	scratch *transport.Region
}

// SignalOp is how a signal changes its slot.
type SignalOp uint8

// Signal operations.
const (
	SigAdd SignalOp = iota
	SigSet
)

// ParseSignalOp accepts "add" and "set".
func ParseSignalOp(s string) (SignalOp, error) {
	switch s {
	case "add":
		return SigAdd, nil
	case "set":
		return SigSet, nil
	}
	return 0, fmt.Errorf("unknown signal op %q (want add or set)", s)
}

func (o SignalOp) String() string {
	if o == SigSet {
		return "set"
	}
	return "add"
}

// NewWindow is collective: every rank gets a window of opts.Bytes bytes
// that every peer can write. The caller checks that all ranks pass the same
// options (the engine's collective check).
func (r *Rank) NewWindow(ctx context.Context, opts Options) (*Window, error) {
	if opts.Path == "" {
		opts.Path = "auto"
	}
	if opts.IPC == "" || opts.IPC == "auto" {
		opts.IPC = transport.IPCLegacy
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	id := r.nextWindow
	r.nextWindow++
	lay := newLayout(r.N(), opts.Bytes, opts.Signals, opts.Counters, opts.Barriers)
	reg, err := r.Backend.Share(ctx, r.Ex, r.Topo, lay.Total, opts.IPC)
	if err != nil {
		return nil, fmt.Errorf("rank %d: window %d: %w", r.ID(), id, err)
	}
	topo := r.Topo
	if reg.HostShared {
		topo = topo.HostShared()
	}
	if topo.AnyNet() {
		if err := transport.ShareNetwork(ctx, r.Ex, topo, r.Net, reg); err != nil {
			_ = reg.Close()
			return nil, fmt.Errorf("rank %d: window %d: %w", r.ID(), id, err)
		}
		if u, ok := r.Stream.(transport.NetworkUser); ok && r.Net != nil {
			u.UseNetwork(r.Net)
		}
	}
	w := &Window{r: r, id: id, opts: opts, lay: lay, reg: reg, topo: topo, epoch: make([]uint64, opts.Barriers),
		barSlots: make([][]transport.Addr, opts.Barriers)}
	w.describe = w.describeWait
	w.peers = transport.NewPeers(topo, reg)
	w.peers.What = fmt.Sprintf("rank %d: window %d", r.ID(), id)
	w.peers.Timeout = opts.Timeout
	w.pepoch = make([][]uint64, opts.Barriers)
	for i := range w.pepoch {
		w.pepoch[i] = make([]uint64, r.N())
	}
	w.buf = &Buffer{r: r, base: reg.Local.Add(lay.DataOff), size: opts.Bytes,
		name: fmt.Sprintf("window %d's buffer", id), freed: func() bool { return w.freed }}
	return w, nil
}

// ID is the window's number on this rank (the same on every rank).
func (w *Window) ID() int { return w.id }

// Options returns the window's options.
func (w *Window) Options() Options { return w.opts }

// Buffer returns the local data buffer as a buffer view.
func (w *Window) Buffer() *Buffer { return w.buf }

// Rank returns the rank the window belongs to.
func (w *Window) Rank() *Rank { return w.r }

// Memory says where the window's memory lives: "host" (the host backend),
// "device", or "host, mapped by the device" (a CUDA window with network
// peers: the proxy path).
func (w *Window) Memory() string {
	switch {
	case w.reg.HostShared:
		return "host, mapped by the device"
	case w.r.Backend.Name() == "host":
		return "host"
	}
	return "device"
}

// Freed reports whether the window was freed.
func (w *Window) Freed() bool { return w.freed }

func (w *Window) errf(format string, a ...any) error {
	return fmt.Errorf("rank %d: window %d: %s", w.r.ID(), w.id, fmt.Sprintf(format, a...))
}

func (w *Window) live() error {
	if w.freed {
		return &ErrFreed{What: fmt.Sprintf("window %d", w.id)}
	}
	if ps, ok := w.r.Stream.(transport.PathSetter); ok {
		ps.SetPath(w.opts.Path)
	}
	return nil
}

// Reachable reports whether operations can reach peer's part of the
// window (mapped here, or through a network).
func (w *Window) Reachable(peer int) bool {
	return peer >= 0 && peer < w.r.N() && w.peers.Route(peer).Reachable()
}

func (w *Window) checkPeer(peer int) error {
	if peer < 0 || peer >= w.r.N() {
		return argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if !w.peers.Route(peer).Reachable() {
		return argErr("peer", "rank %d is not reachable (transport %s)", peer, w.topo.Kinds[peer])
	}
	return nil
}

func (w *Window) checkSig(arg string, sig int) error {
	if sig < 0 || sig >= w.opts.Signals {
		return argErr(arg, "signal %d is outside 0..%d", sig, w.opts.Signals-1)
	}
	return nil
}

func (w *Window) checkCtr(arg string, ctr int) error {
	if ctr < 0 || ctr >= w.opts.Counters {
		return argErr(arg, "counter %d is outside 0..%d", ctr, w.opts.Counters-1)
	}
	return nil
}

func (w *Window) checkBar(id int) error {
	if id < 0 || id >= w.opts.Barriers {
		return argErr("id", "barrier %d is outside 0..%d", id, w.opts.Barriers-1)
	}
	return nil
}

func (w *Window) local(off uint64) transport.Addr { return w.reg.Local.Add(off) }

// Transport names how peer is reached: "self", "shm", "nvl" or "net".
func (w *Window) Transport(peer int) (string, error) {
	if err := w.live(); err != nil {
		return "", err
	}
	if peer < 0 || peer >= w.r.N() {
		return "", argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	return w.topo.Kinds[peer].String(), nil
}

// TransportVia names what carries operations to a network peer, e.g.
// "ucx: tcp/eth0" ("" for a peer that is not on the network).
func (w *Window) TransportVia(peer int) (string, error) {
	if err := w.live(); err != nil {
		return "", err
	}
	if peer < 0 || peer >= w.r.N() {
		return "", argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if k := w.peers.Route(peer).Key; k != nil {
		return k.Via(), nil
	}
	return "", nil
}

// Free is collective: it waits for the rank's stream, meets every rank (so
// no peer still writes into it) and unmaps the window.
func (w *Window) Free(ctx context.Context) error {
	if err := w.live(); err != nil {
		return err
	}
	serr := w.r.Stream.Sync(ctx)
	if err := w.freeScratch(); err != nil && serr == nil {
		serr = err
	}
	berr := w.r.Ex.Barrier(ctx)
	w.freed = true
	if berr == nil {
		// Drop our mappings of the peers, then meet again so that nobody
		// frees memory that a peer still maps.
		uerr := w.reg.UnmapPeers()
		berr = w.r.Ex.Barrier(ctx)
		if uerr != nil && berr == nil {
			berr = uerr
		}
	}
	cerr := w.reg.Close()
	if berr != nil {
		return w.errf("free: %v", berr)
	}
	if serr != nil {
		return w.errf("free: pending operations failed: %v", serr)
	}
	if cerr != nil {
		return w.errf("free: %v", cerr)
	}
	return nil
}

// Release unmaps the window without meeting the other ranks (teardown
// after a failure).
func (w *Window) Release() {
	if !w.freed {
		w.freed = true
		_ = w.freeScratch()
		_ = w.reg.Close()
	}
}
