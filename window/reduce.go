package window

import (
	"fmt"

	"github.com/luacoll/luacoll/transport"
)

// Reduction is a local reduce: N bytes of Dst at DstOff become
// Dst op Src, element by element, with Src's N bytes at SrcOff. Src and
// Dst are buffers of this rank (the window's own buffer included).
type Reduction struct {
	Dst    *Buffer
	DstOff uint64
	Src    *Buffer
	SrcOff uint64
	N      uint64
	Type   transport.DType
	Op     transport.RedOp
}

// PeerReduction is a reduce whose source is a peer's data buffer: N bytes
// of Dst at DstOff become Dst op (peer's window at PeerOff).
type PeerReduction struct {
	Peer    int
	PeerOff uint64
	Dst     *Buffer
	DstOff  uint64
	N       uint64
	Type    transport.DType
	Op      transport.RedOp
}

// ReduceScratch is the most a reduce from a network peer stages at a time:
// it gets that much into a scratch buffer of the window, reduces it, and
// goes on with the next piece.
const ReduceScratch = 4 << 20

// reducer returns the backend's reductions, or an error.
func (w *Window) reducer() (transport.Reducer, error) {
	rd, ok := w.r.Backend.(transport.Reducer)
	if !ok {
		return nil, w.errf("reduce: backend %s has no reductions", w.r.Backend.Name())
	}
	return rd, nil
}

// checkElems checks the length and an offset pair against the element
// size of t: n a whole number of elements, both addresses aligned.
func checkElems(t transport.DType, n uint64, dstArg string, dst transport.Addr, srcArg string, src transport.Addr) error {
	sz := t.Size()
	if n%sz != 0 {
		return argErr("n", "%d bytes is not a whole number of %s elements (%d bytes each)", n, t, sz)
	}
	if uint64(dst)%sz != 0 {
		return argErr(dstArg, "not aligned to the %d-byte %s elements", sz, t)
	}
	if uint64(src)%sz != 0 {
		return argErr(srcArg, "not aligned to the %d-byte %s elements", sz, t)
	}
	return nil
}

// overlaps reports whether n bytes at a and at b share a byte.
func overlaps(a, b transport.Addr, n uint64) bool {
	return n > 0 && a < b.Add(n) && b < a.Add(n)
}

// Reduce enqueues r.Dst op= r.Src over r.N bytes (r.N/size elements).
// Bad input (a freed buffer, a range past an end, n not a whole number of
// elements, a misaligned offset, overlapping ranges) is refused before
// anything is enqueued, naming the argument.
func (w *Window) Reduce(r Reduction) error {
	if err := w.live(); err != nil {
		return err
	}
	rd, err := w.reducer()
	if err != nil {
		return err
	}
	dst, err := w.srcAddr("dst", r.Dst, r.DstOff, r.N)
	if err != nil {
		return err
	}
	src, err := w.srcAddr("src", r.Src, r.SrcOff, r.N)
	if err != nil {
		return err
	}
	if err := checkElems(r.Type, r.N, "dst_off", dst, "src_off", src); err != nil {
		return err
	}
	if overlaps(dst, src, r.N) {
		return argErr("src", "%d bytes at offset %d of %s overlap the destination (offset %d of %s)",
			r.N, r.SrcOff, r.Src.name, r.DstOff, r.Dst.name)
	}
	start := w.r.traceStart()
	rd.Reduce(w.r.Stream, dst, src, r.N/r.Type.Size(), r.Type, r.Op)
	if w.r.Trace != nil {
		o := w.op("reduce", start)
		o.Bytes = r.N
		w.r.record(o)
	}
	return nil
}

// ReduceFrom enqueues r.Dst op= (peer's data buffer at r.PeerOff) over r.N
// bytes. A peer whose part is mapped here (itself, shared memory, NVLink)
// is read directly by the reduction; a network peer's data is fetched
// into a scratch buffer of the window first, ReduceScratch bytes at a
// time, each piece reduced once it has landed. Bad input is refused as for
// Reduce.
func (w *Window) ReduceFrom(r PeerReduction) error {
	if err := w.live(); err != nil {
		return err
	}
	rd, err := w.reducer()
	if err != nil {
		return err
	}
	if err := w.checkPeer(r.Peer); err != nil {
		return err
	}
	if !inRange(r.PeerOff, r.N, w.opts.Bytes) {
		return checkRange("src_off", "n", r.PeerOff, r.N, w.opts.Bytes, w.peerBufName(r.Peer))
	}
	dst, err := w.srcAddr("dst", r.Dst, r.DstOff, r.N)
	if err != nil {
		return err
	}
	src := w.peers.Addr(r.Peer, w.lay.DataOff+r.PeerOff)
	// A network peer's part has no address here; its offset within the
	// (equally aligned) part is what alignment is about.
	srcAlign := src
	if src == 0 {
		srcAlign = transport.Addr(w.lay.DataOff + r.PeerOff)
	}
	if err := checkElems(r.Type, r.N, "dst_off", dst, "src_off", srcAlign); err != nil {
		return err
	}
	if src != 0 && overlaps(dst, src, r.N) {
		return argErr("dst", "%d bytes at offset %d of %s overlap the source (offset %d of %s)",
			r.N, r.DstOff, r.Dst.name, r.PeerOff, w.peerBufName(r.Peer))
	}
	start := w.r.traceStart()
	count := r.N / r.Type.Size()
	if src != 0 {
		rd.Reduce(w.r.Stream, dst, src, count, r.Type, r.Op)
	} else if err := w.reduceStaged(rd, r, dst); err != nil {
		return err
	}
	if w.r.Trace != nil {
		o := w.op("reduce_from", start)
		o.Peer, o.Bytes = r.Peer, r.N
		w.r.record(o)
	}
	return nil
}

// reduceStaged is ReduceFrom for a network peer: get a piece into the
// scratch buffer, reduce it, next piece. Stream order keeps a piece's get
// behind the previous piece's reduction, so one scratch buffer serves.
func (w *Window) reduceStaged(rd transport.Reducer, r PeerReduction, dst transport.Addr) error {
	if w.scratch == nil {
		reg, err := w.r.Backend.Alloc(ReduceScratch)
		if err != nil {
			return w.errf("reduce_from: scratch buffer: %v", err)
		}
		w.scratch = reg
	}
	piece := ReduceScratch - ReduceScratch%r.Type.Size()
	for off := uint64(0); off < r.N; off += piece {
		n := min(piece, r.N-off)
		w.peers.Get(w.r.Stream, w.scratch.Local, r.Peer, w.lay.DataOff+r.PeerOff+off, n)
		rd.Reduce(w.r.Stream, dst.Add(off), w.scratch.Local, n/r.Type.Size(), r.Type, r.Op)
	}
	return nil
}

// freeScratch releases the scratch buffer of reduceStaged; the stream must
// be idle.
func (w *Window) freeScratch() error {
	if w.scratch == nil {
		return nil
	}
	err := w.scratch.Close()
	w.scratch = nil
	if err != nil {
		return fmt.Errorf("reduce scratch: %w", err)
	}
	return nil
}
