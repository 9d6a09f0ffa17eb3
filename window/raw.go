package window

import (
	"time"

	"github.com/luacoll/luacoll/transport"
)

// Raw is the one way into a window's memory that skips the window's
// checks: the addresses of its parts as mapped on this rank, its barrier
// epochs, and the views and errors that code running the window's
// protocol itself needs (the persistent all-gather's protocols, a plan's
// kernel, the benchmarks' reference loops).
//
// Nothing here checks that the window is live, that a peer or slot exists,
// or that an address is mapped: a peer's address is 0 when its part is not
// mapped here (a network peer), and writing through an address bypasses
// the stream order, the trace and the slot reservations that the window's
// operations keep. Use the window's operations wherever they do the job.
type Raw struct{ w *Window }

// Raw returns the unchecked way into w's memory (see Raw).
func (w *Window) Raw() Raw { return Raw{w} }

// Data is the address, as mapped here, of byte off of peer's data buffer
// (0 when peer's part is not mapped here).
func (r Raw) Data(peer int, off uint64) transport.Addr {
	return r.w.peers.Addr(peer, r.w.lay.DataOff+off)
}

// Signal is the address, as mapped here, of the slot sig that sender
// writes in receiver's inbox (0 when receiver's part is not mapped here).
func (r Raw) Signal(receiver, sender, sig int) transport.Addr {
	return r.w.peers.Addr(receiver, r.w.lay.Inbox(sender, sig))
}

// Barrier is the address, as mapped here, of the window-barrier slot id
// that sender writes in receiver's part (0 when not mapped here).
func (r Raw) Barrier(receiver, sender, id int) transport.Addr {
	return r.w.peers.Addr(receiver, r.w.lay.Bar(sender, id))
}

// PairBarrier is the address, as mapped here, of the pairwise-barrier slot
// id that sender writes in receiver's part (0 when not mapped here).
func (r Raw) PairBarrier(receiver, sender, id int) transport.Addr {
	return r.w.peers.Addr(receiver, r.w.lay.PBar(sender, id))
}

// Bell is the address, as mapped here, of rank's bell
// (transport.RingBell): waits on rank's slots of this window sleep on it
// (0 when not mapped here).
func (r Raw) Bell(rank int) transport.Addr { return r.w.bell(rank) }

// LocalData is the address of byte off of this rank's own data buffer, as
// this rank's region holds it.
func (r Raw) LocalData(off uint64) transport.Addr { return r.w.local(r.w.lay.DataOff + off) }

// LocalSignal is the address of the slot sig that sender writes in this
// rank's own inbox.
func (r Raw) LocalSignal(sender, sig int) transport.Addr {
	return r.w.local(r.w.lay.Inbox(sender, sig))
}

// LocalBarrier is the address of the window-barrier slot id that sender
// writes in this rank's own part.
func (r Raw) LocalBarrier(sender, id int) transport.Addr { return r.w.local(r.w.lay.Bar(sender, id)) }

// LocalPairBarrier is the address of the pairwise-barrier slot id that
// sender writes in this rank's own part.
func (r Raw) LocalPairBarrier(sender, id int) transport.Addr {
	return r.w.local(r.w.lay.PBar(sender, id))
}

// LocalCounter is the address of the local counter ctr kept for peer.
func (r Raw) LocalCounter(peer, ctr int) transport.Addr { return r.w.local(r.w.lay.Ctr(peer, ctr)) }

// Flat returns the window's flat range when it is symmetric, else nil.
func (r Raw) Flat() *transport.FlatRange { return r.w.reg.Flat }

// Epoch counts the uses of a barrier slot: after e uses, every rank's row
// of the slot holds e.
type Epoch uint64

// Use is the epoch of the k-th use after e (k from 1): the value a barrier
// writes and waits for.
func (e Epoch) Use(k uint64) uint64 { return uint64(e) + k }

// BarrierEpoch is window barrier id's epoch: its uses so far.
func (r Raw) BarrierEpoch(id int) Epoch { return Epoch(r.w.epoch[id]) }

// PairBarrierEpoch is the epoch of the pairwise barrier id with peer.
func (r Raw) PairBarrierEpoch(peer, id int) Epoch { return Epoch(r.w.pepoch[id][peer]) }

// AdvanceBarrier counts uses uses of window barrier id as Barrier would,
// enqueueing nothing, and returns the epoch before them. It serves work
// that runs the barriers itself (a plan's kernel on the device).
func (r Raw) AdvanceBarrier(id int, uses uint64) Epoch {
	e := r.w.epoch[id]
	r.w.epoch[id] += uses
	return Epoch(e)
}

// AdvancePairBarrier is AdvanceBarrier for the pairwise barrier id with
// peer.
func (r Raw) AdvancePairBarrier(peer, id int, uses uint64) Epoch {
	e := r.w.pepoch[id][peer]
	r.w.pepoch[id][peer] += uses
	return Epoch(e)
}

// WaitFailed is the error of a wait on this window's slots that ran
// outside the window's operations (a plan's kernel) and did not succeed:
// op names it ("wait_signal_from(peer 1, sig 0)"), cond is its condition
// (">= 5"), where says where it came from (" (plan op 3 ...)"), cause is
// transport.ErrTimeout or why it was aborted.
func (r Raw) WaitFailed(op, cond, where string, observed uint64, timeout time.Duration, cause error) *WaitError {
	return r.w.waitFailed(op, cond, where, observed, timeout, cause)
}

// OnStream returns a view of the window whose operations go to s instead
// of the rank's stream, and whose reads of slot values (in wait errors) go
// through be: the same memory, peers, buffers and barrier epochs, so a
// barrier on the view counts with the window's own. It serves a helper
// that runs window operations on another thread (a host function of a
// CUDA graph on the proxy path, with s a host stream over the window's
// host memory): the caller must not use the window and the view on one
// barrier id at the same time. The view records no trace and is never
// freed itself.
func (r Raw) OnStream(s transport.Stream, be transport.Backend) *Window {
	w := r.w
	rk := *w.r
	rk.of = w.r.root()
	rk.Stream, rk.Backend, rk.Trace, rk.Site, rk.Context = s, be, nil, nil, nil
	v := *w
	v.r = &rk
	v.peers = w.peers.Clone()
	v.barSlots = append([][]transport.Addr(nil), w.barSlots...)
	v.inSlots, v.oneSlots = nil, nil
	v.describe = v.describeWait
	return &v
}

// UnmapPeers drops this rank's mappings of the peers' parts (teardown,
// once every rank has stopped writing into them): a later write to a peer
// would fault.
func (r Raw) UnmapPeers() {
	if !r.w.freed {
		_ = r.w.reg.UnmapPeers()
	}
}
