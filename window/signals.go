package window

import "github.com/luacoll/luacoll/transport"

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
	if sig != nil && ctr == nil {
		// One operation of a host stream where the peer is mapped.
		if pr, ok := w.r.Stream.(transport.PutRinger); ok {
			if at := w.peers.Addr(t.Peer, dst); at != 0 {
				slot := w.peers.Addr(t.Peer, w.lay.Inbox(w.r.ID(), sig.ID))
				pr.PutSignalRing(at, src, t.N, slot, sig.Op == SigAdd, sig.Value, w.bell(t.Peer))
				fused = true
			}
		}
	}
	if !fused && sig != nil && (ctr == nil || w.peers.Route(t.Peer).Base == 0) {
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
