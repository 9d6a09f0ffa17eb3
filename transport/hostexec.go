package transport

import "sync/atomic"

// exec runs a non-blocking op; the caller holds mu or is the worker.
// A remote op is posted to its network; a local one first waits for the
// remote ones posted before it (settleRemote).
func (s *HostStream) exec(op *hostOp) error {
	if op.kind == opRemote {
		return s.runRemote(op)
	}
	if err := s.settleRemote(op.gen); err != nil {
		return err
	}
	switch op.kind {
	case opCopy:
		s.copy(op.dst, op.src, op.n, op.cached)
	case opPutSignal:
		s.copy(op.dst, op.src, op.n, false)
		if op.add {
			atomic.AddUint64(hostU64(op.sig), op.v)
			RingBell(op.bell)
			break
		}
		s.store(op.sig, op.v, op.bell)
	case opStore:
		s.store(op.dst, op.v, op.bell)
	case opAdd:
		atomic.AddUint64(hostU64(op.dst), op.v)
		RingBell(op.bell)
	case opReduce:
		ReduceHost(op.dst, op.src, op.n, op.dt, op.redop)
	}
	return nil
}

// store writes v into the slot at dst, after everything before it, and
// wakes a wait asleep on bell (0: none).
func (s *HostStream) store(dst Addr, v uint64, bell Addr) {
	if bell != 0 && atomic.LoadUint32(bellWaiters(bell)) != 0 {
		// Somebody sleeps there: store with a full fence and ring.
		atomic.StoreUint64(hostU64(dst), v)
		RingBell(bell)
		return
	}
	// Nobody sleeps there now: a plain store, and a look at the bell
	// again later, after a fence (flushRings), in case a wait went to
	// sleep in between without seeing the store.
	storeRelease(hostU64(dst), v)
	if bell != 0 {
		s.deferRing(bell)
	}
}

// PutSignalRing implements PutRinger: one operation that copies n bytes
// from src to dst, then adds v to the slot (add) or stores it there, and
// rings bell.
func (s *HostStream) PutSignalRing(dst, src Addr, n uint64, slot Addr, add bool, v uint64, bell Addr) {
	s.enqueue(&hostOp{kind: opPutSignal, dst: dst, src: src, n: n, sig: slot, add: add, v: v, bell: bell})
}

// Reduce implements HostReducer: dst op= src over count elements of type
// t, in stream order, as one operation of the stream (run at once on the
// caller where the stream is idle).
func (s *HostStream) Reduce(dst, src Addr, count uint64, t DType, op RedOp) {
	s.enqueue(&hostOp{kind: opReduce, dst: dst, src: src, n: count, dt: t, redop: op})
}

// copy moves n bytes from src to dst: through the caches when cached or
// when n is at most s.cachedMax (a quarter of the cache: a put's bytes
// are read again soon, by a peer or by the rank), else as Memmove does
// (the runtime's non-temporal stores from 1 MiB send them to memory).
func (s *HostStream) copy(dst, src Addr, n uint64, cached bool) {
	if cached || n <= s.cachedMax {
		MemmoveCached(HostBytes(dst, n), HostBytes(src, n))
		return
	}
	Memmove(HostBytes(dst, n), HostBytes(src, n))
}
