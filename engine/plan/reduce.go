package plan

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Reductions in plans: w:reduce (Reduce) and w:reduce_from (ReduceFrom),
// replayed through the window's Reduce and ReduceFrom.

// reduceFields are a reduction's arguments in the order of its Lua call.
func (o Op) reduceFields() [][2]any {
	var f [][2]any
	add := func(k string, v any) { f = append(f, [2]any{k, v}) }
	if o.Kind == ReduceFrom {
		add("peer", o.Peer)
		add("src_off", o.Off)
		add("dst", BufName(o.Buf))
		add("dst_off", o.BufOff)
	} else {
		add("dst", BufName(o.Buf))
		add("dst_off", o.BufOff)
		add("src", BufName(o.Src))
		add("src_off", o.SrcOff)
	}
	add("n", o.N)
	add("type", o.DType.String())
	add("redop", o.RedOp.String())
	return f
}

// setReduceField is ParseOp's reading of a reduction's own fields (the
// inverse of reduceFields); it reports false for a field it leaves to
// setField.
func (o *Op) setReduceField(name, val string) (bool, error) {
	var err error
	switch {
	case name == "src_off" && o.Kind == ReduceFrom:
		o.Off, err = strconv.ParseUint(val, 10, 64)
	case name == "src" && o.Kind == Reduce:
		o.Src, err = ParseBuf(val)
	case name == "src_off":
		o.SrcOff, err = strconv.ParseUint(val, 10, 64)
	case name == "type":
		o.DType, err = transport.ParseDType(val)
	case name == "redop":
		o.RedOp, err = transport.ParseRedOp(val)
	default:
		return false, nil
	}
	return true, err
}

// checkReduce is Shape.Check for a reduction: the ranges, whole elements,
// offsets aligned to the element (every buffer and the window's data
// start on a page), and no overlap of a reduction's ranges in one memory
// (a local reduce's, or a reduce_from of this rank's own window into it).
func (s Shape) checkReduce(me int, o Op, peer func() error, remote func(string) error, local func(string, string, uint64, uint64) error) error {
	bad := func(arg, format string, a ...any) error {
		return &window.ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
	}
	sz := o.DType.Size()
	var err error
	if o.Kind == ReduceFrom {
		err = first(peer, func() error { return remote("src_off") }, func() error { return local("dst_off", "n", o.BufOff, o.N) })
		if err == nil && o.Off%sz != 0 {
			err = bad("src_off", "not aligned to the %d-byte %s elements", sz, o.DType)
		}
		if err == nil && o.intoOwnWindow(me) {
			err = bad("dst", "%d bytes at offset %d overlap the source (offset %d of the same window)", o.N, o.BufOff, o.Off)
		}
	} else {
		err = local("dst_off", "n", o.BufOff, o.N)
		if err == nil {
			if o.Src < 0 || o.Src >= len(s.Buffers) {
				return bad("src", "buffer %d of the plan does not exist", o.Src)
			}
			err = RangeErr("src_off", "n", o.SrcOff, o.N, s.Buffers[o.Src], bufWhat(o.Src, me))
		}
		if err == nil && o.SrcOff%sz != 0 {
			err = bad("src_off", "not aligned to the %d-byte %s elements", sz, o.DType)
		}
		if err == nil && o.Src == o.Buf && overlap(o.SrcOff, o.BufOff, o.N) {
			err = bad("src", "%d bytes at offset %d overlap the destination (offset %d)", o.N, o.SrcOff, o.BufOff)
		}
	}
	switch {
	case err != nil:
	case o.N%sz != 0:
		err = bad("n", "%d bytes is not a whole number of %s elements (%d bytes each)", o.N, o.DType, sz)
	case o.BufOff%sz != 0:
		err = bad("dst_off", "not aligned to the %d-byte %s elements", sz, o.DType)
	}
	return err
}

// enqueueReduce replays a reduction.
func (p *Plan) enqueueReduce(o *Op) error {
	if o.Kind == ReduceFrom {
		return p.w.ReduceFrom(window.PeerReduction{Peer: o.Peer, PeerOff: o.Off, Dst: p.bufs[o.Buf], DstOff: o.BufOff,
			N: o.N, Type: o.DType, Op: o.RedOp})
	}
	return p.w.Reduce(window.Reduction{Dst: p.bufs[o.Buf], DstOff: o.BufOff, Src: p.bufs[o.Src], SrcOff: o.SrcOff,
		N: o.N, Type: o.DType, Op: o.RedOp})
}

// appendReduce writes a reduction's own fields after the common ones of
// List.Encode (nothing for other ops).
func (o Op) appendReduce(b []byte) []byte {
	if o.Kind != Reduce && o.Kind != ReduceFrom {
		return b
	}
	b = binary.AppendVarint(b, int64(o.Src))
	b = binary.AppendUvarint(b, o.SrcOff)
	return append(b, byte(o.DType), byte(o.RedOp))
}

// reduce reads what appendReduce wrote, for a reduction.
func (d *decoder) reduce(o *Op) {
	if d.err != nil || (o.Kind != Reduce && o.Kind != ReduceFrom) {
		return
	}
	o.Src, o.SrcOff = d.int(), d.uvarint()
	o.DType, o.RedOp = transport.DType(d.byte()), transport.RedOp(d.byte())
	if d.err == nil && (!o.DType.Valid() || !o.RedOp.Valid()) {
		d.err = fmt.Errorf("plan message: a reduction has an unknown type %d or op %d", o.DType, o.RedOp)
	}
}

// reduce adds the step of a reduction (op i): dst op= src, src a local
// buffer or (reduce_from) the peer's window as mapped here.
func (c *compiler) reduce(i int) error {
	o := &c.p.ops[i]
	dst, err := c.bufAt(o.Buf, o.BufOff)
	if err != nil {
		return err
	}
	var src cuda.DevicePtr
	if o.Kind == ReduceFrom {
		src, err = c.peerAt(i, o.Peer, c.raw.Data(o.Peer, o.Off))
	} else {
		src, err = c.bufAt(o.Src, o.SrcOff)
	}
	if err != nil {
		return err
	}
	if o.N > 0 {
		c.add(kernels.PlanStep{Kind: kernels.StepReduce, Op: uint32(i), Dst: dst, Src: src, N: o.N,
			Value: kernels.ReduceStepValue(o.DType, o.RedOp)})
	}
	return nil
}
