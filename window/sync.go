package window

import (
	"context"

	"github.com/luacoll/luacoll/transport"
)

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
	// A barrier orders every earlier put before every rank's later
	// operations: network puts complete before the stores (Fence).
	w.peers.Flush(w.r.Stream)
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
		w.wait(w.note(noteBarrier, uint64(id), e, 0), slots, w.writers.others(me, n), transport.WaitEach, transport.CmpGe, e)
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
	w.peers.Flush(w.r.Stream) // as Barrier's
	w.store(peer, w.lay.PBar(me, id), e)
	w.wait(w.note(noteBarrierPeer, uint64(peer), uint64(id), e),
		w.oneSlot(w.lay.PBar(peer, id)), w.writers.one(me, w.r.N(), peer), transport.WaitSum, transport.CmpGe, e)
	if w.r.Trace != nil {
		w.recordWait("barrier_peer", start, peer, SlotPairBarrier, id, transport.CmpGe, e)
	}
	return nil
}

// Fence orders later signals after every earlier put. Stream order gives
// that for mapped peers. The network orders a rank's operations to one
// peer only: a put to one peer and a signal to another may land in either
// order, and the signal's receiver may then read the put's bytes (a third
// rank on the put's node reads them through shared memory) before they
// are there. So where a network reaches a peer a fence is a flush: later
// operations start once the earlier puts completed at their targets.
func (w *Window) Fence() error { return w.Flush() }

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
