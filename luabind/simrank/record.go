package simrank

import (
	"errors"
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// recorder collects a simulated rank's ops while a plan's body runs.
type recorder struct {
	w            *simWindow
	ops          []plan.Op
	opBuf, opSrc []*simBuffer // per op: its local buffer and a local reduce's source (nil: none)
}

// reset empties r, keeping its arrays.
func (r *recorder) reset() {
	clear(r.opBuf)
	clear(r.opSrc)
	r.w, r.ops, r.opBuf, r.opSrc = nil, r.ops[:0], r.opBuf[:0], r.opSrc[:0]
}

// record appends o, issued on window w (nil for a buffer's fill) with
// local buffer b and a local reduce's source src (nil for none), after
// the checks real ranks make.
func (r *recorder) record(rk *rank, a *args, w *simWindow, b, src *simBuffer, o plan.Op) int {
	if w != nil {
		if r.w == nil {
			r.w = w
		} else if r.w != w {
			rk.fail(a.L, a.name, "a plan records the operations of one window: this body already used window %d, not window %d", r.w.num, w.num)
		}
	}
	o.Site = a.site()
	if w != nil {
		sh := plan.ShapeOf(rk.w.o.Ranks, w.opts, nil)
		if b != nil && b != w.data {
			sh.Buffers = append(sh.Buffers, b.size)
			o.Buf = 1
		}
		switch {
		case src == nil || src == w.data:
		case src == b:
			o.Src = o.Buf
		default:
			sh.Buffers = append(sh.Buffers, src.size)
			o.Src = len(sh.Buffers) - 1
		}
		if err := sh.Check(rk.r, o); err != nil {
			var ae *window.ArgError
			if errors.As(err, &ae) {
				rk.fail(a.L, a.name, "bad argument '%s' (%s)", ae.Arg, ae.Msg)
			}
			rk.fail(a.L, a.name, "%v", err)
		}
	}
	if len(r.ops) >= plan.MaxOps {
		rk.fail(a.L, a.name, "a plan holds at most %d ops per rank; this body recorded more: split the schedule into smaller plans", plan.MaxOps)
	}
	r.ops = append(r.ops, o)
	r.opBuf = append(r.opBuf, b)
	r.opSrc = append(r.opSrc, src)
	return 0
}

// list is what was recorded, as a plan.List of ranks ranks, with the
// buffers numbered in order of first use.
func (r *recorder) list(ranks int) (plan.List, []*simBuffer, error) {
	if r.w == nil {
		return plan.List{}, nil, fmt.Errorf("the body enqueued no window operation")
	}
	bufs := []*simBuffer{r.w.data}
	idx := map[*simBuffer]int{r.w.data: plan.WindowBuf}
	var sizes []uint64
	index := func(b *simBuffer) int {
		k, ok := idx[b]
		if !ok {
			sizes = append(sizes, b.size)
			bufs = append(bufs, b)
			k = len(sizes)
			idx[b] = k
		}
		return k
	}
	ops := make([]plan.Op, len(r.ops)) // no spare capacity: a thousand lists are held at once
	copy(ops, r.ops)
	for i := range ops {
		if b := r.opBuf[i]; b != nil {
			ops[i].Buf = index(b)
		}
		if src := r.opSrc[i]; src != nil {
			ops[i].Src = index(src)
		}
	}
	return plan.List{Window: r.w.num, Shape: plan.ShapeOf(ranks, r.w.opts, sizes), Ops: ops}, bufs, nil
}

// windowMethods are a window's methods under simulation: the operations
// plans record (refused outside a plan: they would move data), and the
// window's shape.
func (rk *rank) windowMethods() map[string]lua.LGFunction {
	m := map[string]lua.LGFunction{
		"size": func(L *lua.LState) int {
			L.Push(lua.LNumber(rk.winArg(L, "w:size").opts.Bytes))
			return 1
		},
		"buffer": func(L *lua.LState) int {
			rk.push(L, rk.winArg(L, "w:buffer").data, mtBuffer)
			return 1
		},
		"sync": func(L *lua.LState) int {
			rk.winArg(L, "w:sync") // nothing is in flight
			return 0
		},
		"free": func(L *lua.LState) int {
			rk.winArg(L, "w:free").freed = true
			return 0
		},
		"transport": func(L *lua.LState) int {
			rk.winArg(L, "w:transport")
			a := rk.args(L, "w:transport", 2)
			peer := a.index(0)
			if peer < 0 || peer >= rk.w.o.Ranks {
				rk.fail(L, "w:transport", "bad argument #1 'peer' (%d: want 0..%d)", peer, rk.w.o.Ranks-1)
			}
			k := rk.w.classesFor(rk.w.o.Model, rk.w.o.PerNode)(rk.r, peer)
			L.Push(lua.LString(k.String()))
			if k == transport.KindNet {
				L.Push(lua.LString("simulated"))
				return 2
			}
			return 1
		},
		"info": func(L *lua.LState) int {
			L.Push(rk.windowInfo(L, rk.winArg(L, "w:info")))
			return 1
		},
	}
	for name, rec := range recordings {
		full := "w:" + name
		m[name] = func(L *lua.LState) int {
			w := rk.winArg(L, full)
			if rk.rec == nil {
				rk.needsReal(L, full+" outside a plan")
			}
			a := rk.args(L, full, 2)
			op, b, src := rec(a)
			return rk.rec.record(rk, a, w, b, src, op)
		}
	}
	return m
}

// windowInfo is w:info() of a simulated window: its shape, mode
// "simulated", and the memory a window of the model's backend would have
// on the layout (a CUDA window with network peers lives in host memory).
func (rk *rank) windowInfo(L *lua.LState, w *simWindow) *lua.LTable {
	t := L.NewTable()
	o := w.opts
	t.RawSetString("bytes", lua.LNumber(o.Bytes))
	t.RawSetString("signals", lua.LNumber(o.Signals))
	t.RawSetString("counters", lua.LNumber(o.Counters))
	t.RawSetString("barriers", lua.LNumber(o.Barriers))
	t.RawSetString("timeout_ms", lua.LNumber(o.Timeout.Milliseconds()))
	t.RawSetString("path", lua.LString(o.Path))
	t.RawSetString("ipc", lua.LString(o.IPC))
	t.RawSetString("mode", lua.LString("simulated"))
	memory := "host"
	if localClass(rk.w.o.Model) == transport.KindNVL {
		memory = "device"
		if rk.w.o.PerNode < rk.w.o.Ranks {
			memory = "host, mapped by the device"
		}
	}
	t.RawSetString("memory", lua.LString(memory))
	return t
}

func (rk *rank) winArg(L *lua.LState, name string) *simWindow {
	w, ok := L.CheckUserData(1).Value.(*simWindow)
	if !ok {
		rk.fail(L, name, "a window expected")
	}
	if w.freed {
		rk.fail(L, name, "window %d has been freed", w.num)
	}
	return w
}

// recordings read each recordable window operation's arguments into its
// op, its local buffer and a local reduce's source (as luabind's plan
// recording does for real ranks).
var recordings = map[string]func(a *args) (plan.Op, *simBuffer, *simBuffer){
	"put": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.Put, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4)}, a.buffer(2), nil
	},
	"get": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.Get, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4)}, a.buffer(2), nil
	},
	"put_signal": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.PutSignal, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4),
			Sig: a.index(5), SigValue: a.optU64(6, 1), SigOp: a.sigOp(7, "add")}, a.buffer(2), nil
	},
	"put_counter": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.PutCounter, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4),
			Ctr: a.index(5), CtrValue: a.optU64(6, 1)}, a.buffer(2), nil
	},
	"put_signal_counter": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.PutSignalCounter, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4),
			Sig: a.index(5), SigValue: a.u64(6), Ctr: a.index(7), CtrValue: a.u64(8)}, a.buffer(2), nil
	},
	"signal": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.Signal, Peer: a.index(0), Sig: a.index(1), SigOp: a.sigOp(2, "add"), SigValue: a.optU64(3, 1)}, nil, nil
	},
	"signal_all": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.SignalAll, Sig: a.index(0), SigOp: a.sigOp(1, "add"), SigValue: a.optU64(2, 1)}, nil, nil
	},
	"wait_signal": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.WaitSignal, Sig: a.index(0), Cmp: a.cmp(1), Value: a.u64(2)}, nil, nil
	},
	"wait_signal_from": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.WaitSignalFrom, Peer: a.index(0), Sig: a.index(1), Cmp: a.cmp(2), Value: a.u64(3)}, nil, nil
	},
	"wait_counter": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.WaitCounter, Peer: a.index(0), Ctr: a.index(1), Cmp: a.cmp(2), Value: a.u64(3)}, nil, nil
	},
	"reset_counter": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.ResetCounter, Peer: a.index(0), Ctr: a.index(1)}, nil, nil
	},
	"barrier": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.Barrier, Bar: a.optIndex(0, 0)}, nil, nil
	},
	"barrier_peer": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.BarrierPeer, Peer: a.index(0), Bar: a.optIndex(1, 0)}, nil, nil
	},
	"fence": func(a *args) (plan.Op, *simBuffer, *simBuffer) { return plan.Op{Kind: plan.Fence}, nil, nil },
	"flush": func(a *args) (plan.Op, *simBuffer, *simBuffer) { return plan.Op{Kind: plan.Flush}, nil, nil },
	"reduce": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		dst, src := a.buffer(0), a.buffer(2)
		return plan.Op{Kind: plan.Reduce, BufOff: a.u64(1), SrcOff: a.u64(3), N: a.u64(4), DType: a.dtype(5), RedOp: a.redop(6)}, dst, src
	},
	"reduce_from": func(a *args) (plan.Op, *simBuffer, *simBuffer) {
		return plan.Op{Kind: plan.ReduceFrom, Peer: a.index(0), Off: a.u64(1), BufOff: a.u64(3), N: a.u64(4), DType: a.dtype(5), RedOp: a.redop(6)}, a.buffer(2), nil
	},
}
