package window

import (
	"time"

	"github.com/luacoll/luacoll/transport"
)

// Recorder is told of every window operation as it is enqueued, and of
// every sync of the rank's stream, for a timeline of the job. A Rank's
// Trace is nil unless tracing is on; then each operation costs one nil
// check.
type Recorder interface {
	// Op is called once op's stream operations are enqueued.
	Op(op Op)
	// Sync is called when a sync of the rank's stream that started at
	// start returns err.
	Sync(start time.Time, err error)
}

// SlotKind says which kind of slot an operation signals or waits on.
type SlotKind uint8

// Slot kinds.
const (
	SlotNone SlotKind = iota
	SlotSignal
	SlotCounter
	SlotBarrier
	SlotPairBarrier
)

func (k SlotKind) String() string {
	switch k {
	case SlotSignal:
		return "sig"
	case SlotCounter:
		return "ctr"
	case SlotBarrier:
		return "barrier"
	case SlotPairBarrier:
		return "barrier_peer"
	}
	return ""
}

// Op is one window operation as a trace sees it: what it is, the peer,
// bytes and slot it touches, and, for a wait, the condition it waited for.
type Op struct {
	Name   string // the Lua method: "put", "put_signal", "wait_signal", ...
	Window int
	Peer   int // the peer written to, read from or waited on; -1: none, or every peer
	Bytes  uint64
	Kind   SlotKind // the slot signalled or waited on
	Slot   int      // its id (a barrier's id), when Kind is not SlotNone
	Value  uint64   // the signal's value, the wait's target, the barrier's epoch
	SigOp  SignalOp // how a signal changes its slot
	Ctr    int      // a put_signal's counter, -1 for none
	Wait   bool     // Cmp Value is the condition waited for
	Cmp    transport.Cmp
	Site   Site
	// Enqueued is when the call was made; Done is reached when the
	// operation completed on the stream (nil when the stream cannot say).
	Enqueued time.Time
	Done     transport.Stamp
}

// traceStart is the time an operation starts, when tracing (zero
// otherwise: no clock read).
func (r *Rank) traceStart() time.Time {
	if r.Trace == nil {
		return time.Time{}
	}
	return time.Now()
}

// op begins a traced operation's description.
func (w *Window) op(name string, start time.Time) Op {
	return Op{Name: name, Window: w.id, Peer: -1, Ctr: -1, Site: w.r.site(), Enqueued: start}
}

// record stamps the stream behind op and hands op to the recorder.
func (r *Rank) record(op Op) {
	if st, ok := r.Stream.(transport.Stamper); ok {
		op.Done = st.Stamp()
	}
	r.Trace.Op(op)
}

// recordWait records a wait on slot kind/id for cmp v.
func (w *Window) recordWait(name string, start time.Time, peer int, kind SlotKind, id int, cmp transport.Cmp, v uint64) {
	o := w.op(name, start)
	o.Peer, o.Kind, o.Slot, o.Wait, o.Cmp, o.Value = peer, kind, id, true, cmp, v
	w.r.record(o)
}
