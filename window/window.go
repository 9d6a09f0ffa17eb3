package window

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

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

// srcAddr validates a source buffer range.
func (w *Window) srcAddr(arg string, src *Buffer, off, n uint64) (transport.Addr, error) {
	if src == nil {
		return 0, argErr(arg, "a buffer or window is required")
	}
	if src.r.root() != w.r.root() {
		return 0, argErr(arg, "%s belongs to another rank context", src.name)
	}
	if src.freed() {
		return 0, argErr(arg, "%s has been freed", src.name)
	}
	if off > src.size || n > src.size-off {
		// (the argument's name is built only here: this runs for every
		// op a plan replays)
		return 0, checkRange(arg+"_off", "n", off, n, src.size, src.name)
	}
	return src.base.Add(off), nil
}

// Transfer describes a put or get.
type Transfer struct {
	Peer     int
	PeerOff  uint64  // offset in the peer's data buffer
	Local    *Buffer // local buffer (source of a put, destination of a get)
	LocalOff uint64
	N        uint64
}

func (w *Window) checkPut(t Transfer) (transport.Addr, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	if err := w.checkPeer(t.Peer); err != nil {
		return 0, err
	}
	if !inRange(t.PeerOff, t.N, w.opts.Bytes) {
		// The name is built only for the error: puts are a hot path.
		return 0, checkRange("dst_off", "n", t.PeerOff, t.N, w.opts.Bytes, w.peerBufName(t.Peer))
	}
	return w.srcAddr("src", t.Local, t.LocalOff, t.N)
}

// Put copies t.N bytes from the local buffer into the peer's data buffer.
func (w *Window) Put(t Transfer) error {
	src, err := w.checkPut(t)
	if err != nil {
		return err
	}
	start := w.r.traceStart()
	w.peers.Put(w.r.Stream, t.Peer, w.lay.DataOff+t.PeerOff, src, t.N)
	if w.r.Trace != nil {
		o := w.op("put", start)
		o.Peer, o.Bytes = t.Peer, t.N
		w.r.record(o)
	}
	return nil
}

func (w *Window) peerBufName(peer int) string {
	return fmt.Sprintf("window %d on rank %d", w.id, peer)
}

// Get copies t.N bytes from the peer's data buffer into the local buffer.
func (w *Window) Get(t Transfer) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkPeer(t.Peer); err != nil {
		return err
	}
	if !inRange(t.PeerOff, t.N, w.opts.Bytes) {
		return checkRange("src_off", "n", t.PeerOff, t.N, w.opts.Bytes, w.peerBufName(t.Peer))
	}
	if t.Local == nil {
		return argErr("dst", "a buffer or window is required")
	}
	dst, err := w.srcAddr("dst", t.Local, t.LocalOff, t.N)
	if err != nil {
		return err
	}
	start := w.r.traceStart()
	w.peers.Get(w.r.Stream, dst, t.Peer, w.lay.DataOff+t.PeerOff, t.N)
	if w.r.Trace != nil {
		o := w.op("get", start)
		o.Peer, o.Bytes = t.Peer, t.N
		w.r.record(o)
	}
	return nil
}

// Sig names a signal update.
type Sig struct {
	ID    int
	Value uint64
	Op    SignalOp
}

// Ctr names a counter update.
type Ctr struct {
	ID    int
	Value uint64
}

func (w *Window) enqueueSignal(peer int, s Sig) {
	slot := w.lay.Inbox(w.r.ID(), s.ID)
	if s.Op == SigSet {
		w.store(peer, slot, s.Value)
	} else if rs, ok := w.r.Stream.(transport.Ringer); ok && w.peers.Addr(peer, slot) != 0 {
		rs.Add64Ring(w.peers.Addr(peer, slot), s.Value, w.bell(peer))
	} else {
		w.peers.Add64(w.r.Stream, peer, slot, s.Value)
	}
}

// store enqueues a store of v into a slot of peer's region, ringing the
// peer's bell where the stream can.
func (w *Window) store(peer int, off, v uint64) {
	if rs, ok := w.r.Stream.(transport.Ringer); ok && w.peers.Addr(peer, off) != 0 {
		rs.Store64Ring(w.peers.Addr(peer, off), v, w.bell(peer))
		return
	}
	w.peers.Store64(w.r.Stream, peer, off, v)
}

// bell is the address of rank's bell (transport.RingBell) in this window,
// as mapped here: waits on rank's slots of this window sleep on it.
func (w *Window) bell(rank int) transport.Addr {
	return w.peers.Addr(rank, w.lay.BellOff) // 0: not mapped here
}

// PutSignal is Put followed by a signal on the peer that the peer never
// sees before the data. A nil sig or ctr leaves that part out.
func (w *Window) PutSignal(t Transfer, sig *Sig, ctr *Ctr) error {
	src, err := w.checkPut(t)
	if err != nil {
		return err
	}
	if sig != nil {
		if err := w.checkSig("sig", sig.ID); err != nil {
			return err
		}
	}
	if ctr != nil {
		if err := w.checkCtr("ctr", ctr.ID); err != nil {
			return err
		}
	}
	start := w.r.traceStart()
	dst := w.lay.DataOff + t.PeerOff
	fused := false
	if sig != nil && (ctr == nil || w.peers.Route(t.Peer).Base == 0) {
		fused = w.peers.PutSignal(w.r.Stream, t.Peer, dst, src, t.N, w.lay.Inbox(w.r.ID(), sig.ID), sig.Op == SigAdd, sig.Value)
	}
	if !fused {
		w.peers.Put(w.r.Stream, t.Peer, dst, src, t.N)
		if sig != nil {
			w.enqueueSignal(t.Peer, *sig)
		}
	}
	if ctr != nil {
		w.r.Stream.Add64(w.local(w.lay.Ctr(t.Peer, ctr.ID)), ctr.Value)
	}
	if w.r.Trace != nil {
		o := w.op("put_signal", start)
		o.Peer, o.Bytes = t.Peer, t.N
		if sig != nil {
			o.Kind, o.Slot, o.Value, o.SigOp = SlotSignal, sig.ID, sig.Value, sig.Op
		}
		if ctr != nil {
			o.Ctr = ctr.ID
		}
		w.r.record(o)
	}
	return nil
}

// Signal updates this rank's row of the peer's inbox.
func (w *Window) Signal(peer int, s Sig) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkPeer(peer); err != nil {
		return err
	}
	if err := w.checkSig("sig", s.ID); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.enqueueSignal(peer, s)
	if w.r.Trace != nil {
		o := w.op("signal", start)
		o.Peer, o.Kind, o.Slot, o.Value, o.SigOp = peer, SlotSignal, s.ID, s.Value, s.Op
		w.r.record(o)
	}
	return nil
}

// SignalAll signals every other rank once.
func (w *Window) SignalAll(s Sig) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkSig("sig", s.ID); err != nil {
		return err
	}
	for i := 1; i < w.r.N(); i++ {
		peer := (w.r.ID() + i) % w.r.N()
		if err := w.checkPeer(peer); err != nil {
			return err
		}
	}
	start := w.r.traceStart()
	for i := 1; i < w.r.N(); i++ {
		w.enqueueSignal((w.r.ID()+i)%w.r.N(), s)
	}
	if w.r.Trace != nil {
		o := w.op("signal_all", start)
		o.Kind, o.Slot, o.Value, o.SigOp = SlotSignal, s.ID, s.Value, s.Op
		w.r.record(o)
	}
	return nil
}

// WaitError is a wait that did not succeed: it timed out or was aborted.
type WaitError struct {
	Rank, Window int
	Op           string // e.g. "wait_signal(sig 2)"
	Cond         string // e.g. ">= 3"
	Observed     uint64
	Msg          string
	Where        string
	Cause        error
	// Rows, for a wait on several peers' slots, says where each stood
	// when it timed out and which peer held it up.
	Rows string
}

func (e *WaitError) Error() string {
	msg := fmt.Sprintf("rank %d: window %d: %s %s%s: %s; last value seen %d",
		e.Rank, e.Window, e.Op, e.Cond, e.Where, e.Msg, e.Observed)
	if e.Rows != "" {
		msg += "; " + e.Rows
	}
	return msg
}

func (e *WaitError) Unwrap() error { return e.Cause }

// wait enqueues a wait; note describes it for an error, which is made only
// then (no formatting, and no allocation, on the hot path).
func (w *Window) wait(note transport.WaitNote, slots []transport.Addr, mode transport.WaitMode, cmp transport.Cmp, v uint64) {
	w.r.Stream.Wait(transport.WaitSpec{Slots: slots, Mode: mode, Cmp: cmp, Value: v, Bell: w.local(w.lay.BellOff),
		Timeout: w.opts.Timeout, Describe: w.describe, Note: note})
}

// suspects reads a timed-out wait's slots and says which peers held it
// up: for a wait on each slot, those whose slot fails the condition; for
// a sum, the peers whose rows are behind the others' (a rank that stopped,
// or is slow, or never got there). "" when the slots cannot be read.
func (w *Window) suspects(slots []transport.Addr, ranks []int, mode transport.WaitMode, cmp transport.Cmp, v uint64) string {
	vals := make([]uint64, len(slots))
	var b [8]byte
	for i, a := range slots {
		if err := w.r.Backend.Read(b[:], a); err != nil {
			return ""
		}
		vals[i] = binary.LittleEndian.Uint64(b[:])
	}
	var parts, behind []string
	lo, hi := ^uint64(0), uint64(0)
	for i, r := range ranks {
		if r != w.r.ID() {
			lo, hi = min(lo, vals[i]), max(hi, vals[i])
		}
	}
	for i, r := range ranks {
		if r == w.r.ID() && vals[i] == 0 {
			continue // its own row of its own inbox: normally unused
		}
		parts = append(parts, fmt.Sprintf("rank %d: %d", r, vals[i]))
		if r == w.r.ID() {
			continue
		}
		if (mode == transport.WaitEach && !cmp.Holds(vals[i], v)) || (mode != transport.WaitEach && lo < hi && vals[i] == lo) {
			behind = append(behind, fmt.Sprint(r))
		}
	}
	msg := "slots by peer: " + strings.Join(parts, ", ")
	switch {
	case len(behind) == 1:
		msg += "; held up by rank " + behind[0] + " (stopped, slow, or not at this step?)"
	case len(behind) > 1:
		msg += "; held up by ranks " + strings.Join(behind, ", ") + " (stopped, slow, or not at this step?)"
	}
	return msg
}

// allRanks is 0..N-1 (the senders of inbox rows).
func (w *Window) allRanks() []int {
	r := make([]int, w.r.N())
	for i := range r {
		r[i] = i
	}
	return r
}

// inboxSlots are the slots of signal sig, one per sender (made at the
// first wait on sig; never changed, so queued waits may share them).
func (w *Window) inboxSlots(sig int) []transport.Addr {
	if w.inSlots == nil {
		w.inSlots = map[int][]transport.Addr{}
	}
	s := w.inSlots[sig]
	if s == nil {
		s = make([]transport.Addr, w.r.N())
		for r := range s {
			s[r] = w.local(w.lay.Inbox(r, sig))
		}
		w.inSlots[sig] = s
	}
	return s
}

// oneSlot is the list of the one slot at offset off of this rank's
// region, made once (queued waits may share it).
func (w *Window) oneSlot(off uint64) []transport.Addr {
	if w.oneSlots == nil {
		w.oneSlots = map[uint64][]transport.Addr{}
	}
	s := w.oneSlots[off]
	if s == nil {
		s = []transport.Addr{w.local(off)}
		w.oneSlots[off] = s
	}
	return s
}

// WaitSignal waits until the sum over all senders of slot sig satisfies cmp v.
func (w *Window) WaitSignal(sig int, cmp transport.Cmp, v uint64) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkSig("sig", sig); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitSignal, uint64(sig), 0, 0), w.inboxSlots(sig), transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_signal", start, -1, SlotSignal, sig, cmp, v)
	}
	return nil
}

// WaitSignalFrom waits on one sender's row only.
func (w *Window) WaitSignalFrom(peer, sig int, cmp transport.Cmp, v uint64) error {
	if err := w.live(); err != nil {
		return err
	}
	if peer < 0 || peer >= w.r.N() {
		return argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if err := w.checkSig("sig", sig); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitSignalFrom, uint64(peer), uint64(sig), 0),
		w.oneSlot(w.lay.Inbox(peer, sig)), transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_signal_from", start, peer, SlotSignal, sig, cmp, v)
	}
	return nil
}

func (w *Window) readLocal(off uint64) (uint64, error) {
	var b [8]byte
	if err := w.r.Backend.Read(b[:], w.local(off)); err != nil {
		return 0, w.errf("read: %v", err)
	}
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, nil
}

// ReadSignal returns the current sum of slot sig over all senders.
func (w *Window) ReadSignal(sig int) (uint64, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	if err := w.checkSig("sig", sig); err != nil {
		return 0, err
	}
	var sum uint64
	for r := 0; r < w.r.N(); r++ {
		v, err := w.readLocal(w.lay.Inbox(r, sig))
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// ReadSignalFrom returns the current value of one sender's slot sig.
func (w *Window) ReadSignalFrom(peer, sig int) (uint64, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	if peer < 0 || peer >= w.r.N() {
		return 0, argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if err := w.checkSig("sig", sig); err != nil {
		return 0, err
	}
	return w.readLocal(w.lay.Inbox(peer, sig))
}

func (w *Window) checkCounterArgs(peer, ctr int) error {
	if err := w.live(); err != nil {
		return err
	}
	if peer < 0 || peer >= w.r.N() {
		return argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	return w.checkCtr("ctr", ctr)
}

// WaitCounter waits until local counter ctr for peer satisfies cmp v.
func (w *Window) WaitCounter(peer, ctr int, cmp transport.Cmp, v uint64) error {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitCounter, uint64(peer), uint64(ctr), 0),
		w.oneSlot(w.lay.Ctr(peer, ctr)), transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_counter", start, peer, SlotCounter, ctr, cmp, v)
	}
	return nil
}

// ReadCounter returns the current value of a local counter.
func (w *Window) ReadCounter(peer, ctr int) (uint64, error) {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return 0, err
	}
	return w.readLocal(w.lay.Ctr(peer, ctr))
}

// ResetCounter enqueues a reset of a local counter to zero.
func (w *Window) ResetCounter(peer, ctr int) error {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.r.Stream.Store64(w.local(w.lay.Ctr(peer, ctr)), 0)
	if w.r.Trace != nil {
		o := w.op("reset_counter", start)
		o.Peer, o.Kind, o.Slot = peer, SlotCounter, ctr
		w.r.record(o)
	}
	return nil
}

// ResetSignals enqueues zeroing of this rank's whole inbox.
func (w *Window) ResetSignals() error {
	if err := w.live(); err != nil {
		return err
	}
	start := w.r.traceStart()
	for r := 0; r < w.r.N(); r++ {
		for s := 0; s < w.opts.Signals; s++ {
			w.r.Stream.Store64(w.local(w.lay.Inbox(r, s)), 0)
		}
	}
	if w.r.Trace != nil {
		w.r.record(w.op("reset_signals", start))
	}
	return nil
}

// Barrier is a barrier of all ranks of the window on slot id. Slots are
// monotonic: each use raises the epoch, so a slot is reusable forever.
func (w *Window) Barrier(id int) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkBar(id); err != nil {
		return err
	}
	me, n := w.r.ID(), w.r.N()
	for i := 1; i < n; i++ {
		if err := w.checkPeer((me + i) % n); err != nil {
			return err
		}
	}
	start := w.r.traceStart()
	w.epoch[id]++
	e := w.epoch[id]
	if w.barSlots[id] == nil {
		// Every use of id waits on the same slots: list them once.
		for i := 1; i < n; i++ {
			w.barSlots[id] = append(w.barSlots[id], w.local(w.lay.Bar((me+i)%n, id)))
		}
	}
	slots := w.barSlots[id]
	for i := 1; i < n; i++ {
		p := (me + i) % n
		w.store(p, w.lay.Bar(me, id), e)
	}
	if len(slots) > 0 {
		w.wait(w.note(noteBarrier, uint64(id), e, 0), slots, transport.WaitEach, transport.CmpGe, e)
	}
	if w.r.Trace != nil {
		w.recordWait("barrier", start, -1, SlotBarrier, id, transport.CmpGe, e)
	}
	return nil
}

// BarrierPeer is a barrier of this rank and peer only.
func (w *Window) BarrierPeer(peer, id int) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkPeer(peer); err != nil {
		return err
	}
	if err := w.checkBar(id); err != nil {
		return err
	}
	w.pepoch[id][peer]++
	e := w.pepoch[id][peer]
	me := w.r.ID()
	if peer == me {
		return nil
	}
	start := w.r.traceStart()
	w.store(peer, w.lay.PBar(me, id), e)
	w.wait(w.note(noteBarrierPeer, uint64(peer), uint64(id), e),
		w.oneSlot(w.lay.PBar(peer, id)), transport.WaitSum, transport.CmpGe, e)
	if w.r.Trace != nil {
		w.recordWait("barrier_peer", start, peer, SlotPairBarrier, id, transport.CmpGe, e)
	}
	return nil
}

// Fence orders later signals after every earlier put. Stream order gives
// that for mapped peers, and signals to network peers are fenced behind the
// data before them, so nothing is enqueued.
func (w *Window) Fence() error { return w.live() }

// Flush waits (in stream order) until earlier puts completed. Copies into
// mapped peers complete when they run, so stream order is enough; where a
// network reaches a peer, a flush waits for remote completion.
func (w *Window) Flush() error {
	if err := w.live(); err != nil {
		return err
	}
	w.peers.Flush(w.r.Stream)
	return nil
}

// Sync waits for everything enqueued on the rank's stream and raises the
// first error any of it hit.
func (w *Window) Sync(ctx context.Context) error {
	if err := w.live(); err != nil {
		return err
	}
	return w.r.Sync(ctx)
}

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
