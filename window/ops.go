package window

import (
	"fmt"

	"github.com/luacoll/luacoll/transport"
)

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
	if err := w.selfOverlap(t, "src_off", "destination"); err != nil {
		return 0, err
	}
	return w.srcAddr("src", t.Local, t.LocalOff, t.N)
}

// selfOverlap refuses a put or get between this rank's window and itself
// whose two ranges overlap: a copy engine or a kernel reads and writes
// them in no set order.
func (w *Window) selfOverlap(t Transfer, arg, other string) error {
	if t.Local == w.buf && t.N > 0 && t.LocalOff < t.PeerOff+t.N && t.PeerOff < t.LocalOff+t.N && t.Peer == w.r.ID() {
		return argErr(arg, "%d bytes at offset %d overlap the %s (offset %d of the same window)", t.N, t.LocalOff, other, t.PeerOff)
	}
	return nil
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
	if err := w.selfOverlap(t, "dst_off", "source"); err != nil {
		return err
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
