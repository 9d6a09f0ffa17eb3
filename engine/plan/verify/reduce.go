package verify

import "github.com/luacoll/luacoll/engine/plan"

// Reductions (reduce, reduce_from) run in stream order: the reducing rank
// reads its source and reads and writes its destination when the op
// runs, so both accesses are complete at the op's own clock. A
// reduce_from's source is the peer's window: reading it races with any
// write into that range the reducing rank has not seen a signal (or
// barrier) order, like a put's source read.

// reduce adds the accesses of rank r's reduction o (ref, at clock c).
func (s *sim) reduce(r int, st *rankState, o *plan.Op, ref *opRef, c uint32) {
	from, buf, off := r, o.Src, o.SrcOff
	if o.Kind == plan.ReduceFrom {
		from, buf, off = o.Peer, plan.WindowBuf, o.Off
	}
	src := &access{by: ref, pc: st.pc, lo: off, hi: off + o.N, done: c}
	s.touch(from, st.vc, s.mem[from][buf], src)
	dm := s.mem[r][o.Buf]
	dst := &access{by: ref, pc: st.pc, write: true, lo: o.BufOff, hi: o.BufOff + o.N, done: c}
	s.touch(r, st.vc, dm, dst)
	dm.put(o.BufOff, dm.get(o.BufOff, o.BufOff+o.N), ref)
}

// isReduce reports whether k is a reduction.
func isReduce(k plan.Kind) bool { return k == plan.Reduce || k == plan.ReduceFrom }
