package luabind

import (
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// dtype reads argument i as an element type ("f32" when absent).
func (c *call) dtype(i int) transport.DType {
	t, err := transport.ParseDType(c.optStr(i, "f32"))
	if err != nil {
		c.badArg(i, "%v", err)
	}
	return t
}

// redop reads argument i as a reduction operator ("sum" when absent).
func (c *call) redop(i int) transport.RedOp {
	op, err := transport.ParseRedOp(c.optStr(i, "sum"))
	if err != nil {
		c.badArg(i, "%v", err)
	}
	return op
}

// reduction reads w:reduce's arguments.
func (c *call) reduction() window.Reduction {
	return window.Reduction{Dst: c.buffer(0), DstOff: c.u64(1), Src: c.buffer(2), SrcOff: c.u64(3), N: c.u64(4),
		Type: c.dtype(5), Op: c.redop(6)}
}

// peerReduction reads w:reduce_from's arguments.
func (c *call) peerReduction() window.PeerReduction {
	return window.PeerReduction{Peer: c.index(0), PeerOff: c.u64(1), Dst: c.buffer(2), DstOff: c.u64(3), N: c.u64(4),
		Type: c.dtype(5), Op: c.redop(6)}
}

func reduceEntries() []*Entry {
	const g = "Reductions"
	return []*Entry{
		fn("w:reduce", "(dst, dst_off, src, src_off, n, type=\"f32\", op=\"sum\")", "", g,
			"Enqueues dst op= src over n bytes, element by element: dst and src are local buffers or windows, type one of "+
				"f32 f64 f16 bf16 i32 i64 u32 u64, op one of sum prod min max (f16 and bf16 are combined in f32 and rounded "+
				"to nearest even; integers wrap). n must be a whole number of elements, both offsets aligned to the element, "+
				"and the ranges must not overlap.", func(c *call) int {
				c.check(c.win().Reduce(c.reduction()))
				return 0
			}),
		fn("w:reduce_from", "(peer, src_off, dst, dst_off, n, type=\"f32\", op=\"sum\")", "", g,
			"Enqueues local dst op= (peer's data buffer at src_off) over n bytes. A peer mapped here (itself, shared memory, "+
				"NVLink) is read directly by the reduction; a network peer's data is fetched into a scratch buffer first and "+
				"reduced once it landed. Types, ops and checks as for w:reduce.", func(c *call) int {
				c.check(c.win().ReduceFrom(c.peerReduction()))
				return 0
			}),
	}
}

// Reductions record into plans as reduce and reduce_from ops.
func init() {
	planRecording["w:reduce"] = func(c *call) int {
		w, r := c.win(), c.reduction()
		return c.s.plans.rec.recordWith(c, w, r.Dst, r.Src, plan.Op{Kind: plan.Reduce, BufOff: r.DstOff, SrcOff: r.SrcOff, N: r.N,
			DType: r.Type, RedOp: r.Op})
	}
	planRecording["w:reduce_from"] = func(c *call) int {
		w, r := c.win(), c.peerReduction()
		return c.s.plans.rec.record(c, w, r.Dst, plan.Op{Kind: plan.ReduceFrom, Peer: r.Peer, Off: r.PeerOff, BufOff: r.DstOff, N: r.N,
			DType: r.Type, RedOp: r.Op})
	}
}
