package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Kind is a recorded operation, named as the Lua method that enqueues it.
type Kind uint8

// The operations a plan records.
const (
	Put Kind = iota
	Get
	PutSignal
	PutCounter
	PutSignalCounter
	Signal
	SignalAll
	WaitSignal
	WaitSignalFrom
	WaitCounter
	ResetCounter
	Fence
	Flush
	Barrier
	BarrierPeer
	Fill
	Reduce
	ReduceFrom
	numKinds
)

var kindNames = [numKinds]string{"put", "get", "put_signal", "put_counter", "put_signal_counter",
	"signal", "signal_all", "wait_signal", "wait_signal_from", "wait_counter", "reset_counter",
	"fence", "flush", "barrier", "barrier_peer", "fill", "reduce", "reduce_from"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// IsPut reports whether the op moves data into a peer's window.
func (k Kind) IsPut() bool {
	return k == Put || k == PutSignal || k == PutCounter || k == PutSignalCounter
}

// IsWait reports whether the op blocks the stream until a condition holds.
func (k Kind) IsWait() bool {
	return k == WaitSignal || k == WaitSignalFrom || k == WaitCounter
}

// HasSignal reports whether the op writes a signal.
func (k Kind) HasSignal() bool {
	return k == PutSignal || k == PutSignalCounter || k == Signal || k == SignalAll
}

// ReadsPeer reports whether the op reads its peer's window (get,
// reduce_from).
func (k Kind) ReadsPeer() bool { return k == Get || k == ReduceFrom }

// WritesBuf reports whether the op writes its local buffer (Op.Buf):
// a get, a fill or a reduction.
func (k Kind) WritesBuf() bool { return k == Get || k == Fill || k == Reduce || k == ReduceFrom }

// HasCounter reports whether the op adds to a counter.
func (k Kind) HasCounter() bool { return k == PutCounter || k == PutSignalCounter }

// WindowBuf is the buffer index of the window's own data buffer; buffer k
// > 0 is the k-th other buffer the plan uses, numbered in order of first
// use on the recording rank.
const WindowBuf = 0

// Site is where an op was issued in the script.
type Site struct {
	File string
	Line int
}

func (s Site) String() string {
	if s.File == "" {
		return "?"
	}
	if s.Line <= 0 {
		return s.File
	}
	return s.File + ":" + strconv.Itoa(s.Line)
}

// Op is one recorded window or buffer operation. Which fields matter
// depends on Kind: Peer (the other rank of a put, get, signal, wait from,
// counter or pairwise barrier), Off (offset in the peer's data buffer: a
// put's destination, a get's source), Buf and BufOff (the local buffer: a
// put's source, a get's destination, a fill's target), N, the signal (Sig,
// SigValue, SigOp), the counter (Ctr, CtrValue), the wait's condition (Cmp,
// Value: for wait_counter the counter is Ctr of Peer), the barrier slot
// (Bar) and the fill (FillKind, FillArg).
type Op struct {
	Kind     Kind
	Peer     int
	Off      uint64
	Buf      int
	BufOff   uint64
	N        uint64
	Sig      int
	SigValue uint64
	SigOp    window.SignalOp
	Ctr      int
	CtrValue uint64
	Cmp      transport.Cmp
	Value    uint64
	Bar      int
	FillKind transport.FillKind
	FillArg  uint64
	// A reduction (reduce.go): Buf and BufOff are its destination; Src and
	// SrcOff the source buffer of a local reduce (Peer and Off that of
	// reduce_from); DType and RedOp what it computes.
	Src    int
	SrcOff uint64
	DType  transport.DType
	RedOp  transport.RedOp
	Site   Site
}

// BufName names a plan's buffer index as p:ops() and the golden lists do:
// "w" for the window, "b1", "b2", ... for the others.
func BufName(i int) string {
	if i == WindowBuf {
		return "w"
	}
	return "b" + strconv.Itoa(i)
}

var fillNames = map[transport.FillKind]string{transport.FillConst: "const", transport.FillIotaU32: "iota", transport.FillRandU32: "rand"}

// FillName names a fill kind as b:fill spells it.
func FillName(k transport.FillKind) string {
	if s, ok := fillNames[k]; ok {
		return s
	}
	return "fill(" + strconv.Itoa(int(k)) + ")"
}

// Fields returns the op's arguments as (name, value) pairs in the order
// p:ops() and String show them; values are int, uint64 or string.
func (o Op) Fields() [][2]any {
	var f [][2]any
	add := func(k string, v any) { f = append(f, [2]any{k, v}) }
	switch o.Kind {
	case Put, PutSignal, PutCounter, PutSignalCounter:
		add("peer", o.Peer)
		add("off", o.Off)
		add("src", BufName(o.Buf))
		add("src_off", o.BufOff)
		add("n", o.N)
	case Get:
		add("peer", o.Peer)
		add("off", o.Off)
		add("dst", BufName(o.Buf))
		add("dst_off", o.BufOff)
		add("n", o.N)
	case Signal:
		add("peer", o.Peer)
	case WaitSignalFrom, WaitCounter, ResetCounter, BarrierPeer:
		add("peer", o.Peer)
	case Fill:
		add("buf", BufName(o.Buf))
		add("kind", FillName(o.FillKind))
		add("arg", o.FillArg)
	case Reduce, ReduceFrom:
		f = o.reduceFields()
	}
	if o.Kind.HasSignal() {
		add("sig", o.Sig)
		add("value", o.SigValue)
		add("sigop", o.SigOp.String())
	}
	if o.Kind.HasCounter() || o.Kind == WaitCounter || o.Kind == ResetCounter {
		add("ctr", o.Ctr)
		if o.Kind.HasCounter() {
			add("cvalue", o.CtrValue)
		}
	}
	switch o.Kind {
	case WaitSignal, WaitSignalFrom:
		add("sig", o.Sig)
	}
	if o.Kind.IsWait() {
		add("cmp", o.Cmp.String())
		add("value", o.Value)
	}
	if o.Kind == Barrier || o.Kind == BarrierPeer {
		add("id", o.Bar)
	}
	return f
}

// String is one line: the op, its arguments as name=value, and its site.
func (o Op) String() string {
	var b strings.Builder
	b.WriteString(o.Kind.String())
	for _, kv := range o.Fields() {
		fmt.Fprintf(&b, " %s=%v", kv[0], kv[1])
	}
	b.WriteString(" @")
	b.WriteString(o.Site.String())
	return b.String()
}

// Shape is what the checks of one rank's ops need to know: the number of
// ranks, the window's options and the sizes of the plan's buffers on that
// rank (Buffers[0] is the window's data size).
type Shape struct {
	Ranks    int
	Bytes    uint64
	Signals  int
	Counters int
	Barriers int
	Buffers  []uint64
}

// ShapeOf returns the shape of a window and extra buffers.
func ShapeOf(ranks int, o window.Options, bufs []uint64) Shape {
	return Shape{Ranks: ranks, Bytes: o.Bytes, Signals: o.Signals, Counters: o.Counters, Barriers: o.Barriers,
		Buffers: append([]uint64{o.Bytes}, bufs...)}
}

// overlap reports whether [a, a+n) and [b, b+n) share a byte.
func overlap(a, b, n uint64) bool { return n > 0 && a < b+n && b < a+n }

// intoOwnWindow reports whether o, a put, get or reduce_from, moves bytes
// between this rank's window and itself over overlapping ranges: a copy
// engine or a kernel reads and writes them in no set order.
func (o *Op) intoOwnWindow(me int) bool {
	return o.Peer == me && o.Buf == WindowBuf && overlap(o.Off, o.BufOff, o.N)
}

// Check validates op's ranks, ranges and slots against shape, for an op
// recorded on rank me. The error is a *window.ArgError naming the Lua
// argument, as the window layer would have raised it.
func (s Shape) Check(me int, o Op) error {
	bad := func(arg, format string, a ...any) error {
		return &window.ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
	}
	peer := func() error {
		if o.Peer < 0 || o.Peer >= s.Ranks {
			return bad("peer", "rank %d is outside 0..%d", o.Peer, s.Ranks-1)
		}
		return nil
	}
	sig := func() error {
		if o.Sig < 0 || o.Sig >= s.Signals {
			return bad("sig", "signal %d is outside 0..%d", o.Sig, s.Signals-1)
		}
		return nil
	}
	ctr := func() error {
		if o.Ctr < 0 || o.Ctr >= s.Counters {
			return bad("ctr", "counter %d is outside 0..%d", o.Ctr, s.Counters-1)
		}
		return nil
	}
	// The ranges are named only for an error: a thousand ranks' lists
	// are millions of ops checked.
	local := func(offArg, nArg string, off, n uint64) error {
		if o.Buf < 0 || o.Buf >= len(s.Buffers) {
			return bad(strings.TrimSuffix(offArg, "_off"), "buffer %d of the plan does not exist", o.Buf)
		}
		if inRange(off, n, s.Buffers[o.Buf]) {
			return nil
		}
		return RangeErr(offArg, nArg, off, n, s.Buffers[o.Buf], bufWhat(o.Buf, me))
	}
	remote := func(offArg string) error {
		if inRange(o.Off, o.N, s.Bytes) {
			return nil
		}
		return RangeErr(offArg, "n", o.Off, o.N, s.Bytes, fmt.Sprintf("the window on rank %d", o.Peer))
	}
	var err error
	switch o.Kind {
	case Put, PutSignal, PutCounter, PutSignalCounter:
		err = first(peer, func() error { return remote("dst_off") }, func() error { return local("src_off", "n", o.BufOff, o.N) })
		if err == nil && o.intoOwnWindow(me) {
			err = bad("src_off", "%d bytes at offset %d overlap the destination (offset %d of the same window)", o.N, o.BufOff, o.Off)
		}
		if err == nil && o.Kind.HasSignal() {
			err = sig()
		}
		if err == nil && o.Kind.HasCounter() {
			err = ctr()
		}
	case Get:
		err = first(peer, func() error { return remote("src_off") }, func() error { return local("dst_off", "n", o.BufOff, o.N) })
		if err == nil && o.intoOwnWindow(me) {
			err = bad("dst_off", "%d bytes at offset %d overlap the source (offset %d of the same window)", o.N, o.BufOff, o.Off)
		}
	case Signal:
		err = first(peer, sig)
	case SignalAll, WaitSignal:
		err = sig()
	case WaitSignalFrom:
		err = first(peer, sig)
	case WaitCounter, ResetCounter:
		err = first(peer, ctr)
	case Barrier:
		if o.Bar < 0 || o.Bar >= s.Barriers {
			err = bad("id", "barrier %d is outside 0..%d", o.Bar, s.Barriers-1)
		}
	case BarrierPeer:
		err = peer()
		if err == nil && (o.Bar < 0 || o.Bar >= s.Barriers) {
			err = bad("id", "barrier %d is outside 0..%d", o.Bar, s.Barriers-1)
		}
	case Fill:
		if o.Buf < 0 || o.Buf >= len(s.Buffers) {
			err = bad("buf", "buffer %d of the plan does not exist", o.Buf)
		}
	case Reduce, ReduceFrom:
		err = s.checkReduce(me, o, peer, remote, local)
	case Fence, Flush:
	default:
		err = bad("op", "unknown operation %d", o.Kind)
	}
	return err
}

func first(checks ...func() error) error {
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

func bufWhat(buf, rank int) string {
	if buf == WindowBuf {
		return fmt.Sprintf("the window on rank %d", rank)
	}
	return fmt.Sprintf("buffer %s of rank %d", BufName(buf), rank)
}

// inRange reports whether n bytes at off fit in size (RangeErr is nil).
func inRange(off, n, size uint64) bool { return off <= size && n <= size-off }

// RangeErr says, naming the arguments, when n bytes at off do not fit
// size bytes of what; nil when they do.
func RangeErr(offArg, nArg string, off, n, size uint64, what string) error {
	if off > size {
		return &window.ArgError{Arg: offArg, Msg: fmt.Sprintf("offset %d is past the end of %s (%d bytes)", off, what, size)}
	}
	if n > size-off {
		return &window.ArgError{Arg: nArg, Msg: fmt.Sprintf("%d bytes at offset %d run past the end of %s (%d bytes)", n, off, what, size)}
	}
	return nil
}
