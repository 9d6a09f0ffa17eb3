package trace

import (
	"hash/fnv"
	"time"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Flow events link a signal's post on one rank to the wait it completed
// on another, so that a viewer draws an arrow from the put_signal (or
// signal, signal_all) slice to the wait_signal_from slice. Neither rank
// sees the other's events, so both ends name the flow the same way on
// their own: by window, sender, receiver, signal slot and the value the
// sender's posts have brought its slot to (a sum of adds, or the value
// set). A wait_signal_from(peer, sig, ">=" or "==", v) ends the flow
// whose value is v: with adds of 1 (the usual case) that is the post that
// let the wait through. A wait on the sum over every peer (wait_signal)
// gets none (which post completed it is not known at either end), and
// after a reset_signals the receiver's waits get none for that window
// (the senders' counts no longer match its slots).

// Phases of the flow events.
const (
	PhaseFlowStart = "s"
	PhaseFlowEnd   = "f"
)

// flowName and flowCat name every flow event; viewers match a flow's
// ends by them and by the id.
const (
	flowName = "signal to wait"
	flowCat  = "flow"
)

// flowKey is a sender's signal slot at one receiver.
type flowKey struct {
	window, from, to, sig int
}

// flowID is the id both ends compute for the post that brought k's slot
// to value: a hash cut to 53 bits, which a JSON number holds exactly.
func flowID(k flowKey, value uint64) uint64 {
	h := fnv.New64a()
	var b [40]byte
	for i, v := range []uint64{uint64(k.window), uint64(k.from), uint64(k.to), uint64(k.sig), value} {
		for j := 0; j < 8; j++ {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	_, _ = h.Write(b[:])
	return h.Sum64() & (1<<53 - 1)
}

// flowsLocked writes the flow ends op has, a slice from start to end on
// the stream track (completed: it ended then, rather than failed or was
// cut short): a start per receiver for a post, an end for a completed
// wait on one sender's slot (held until the sync that says whether the
// wait was met: settleFlowsLocked).
func (r *Recorder) flowsLocked(op *window.Op, start, end time.Duration, completed bool) {
	if op.Kind != window.SlotSignal && op.Name != "reset_signals" {
		return
	}
	mid := start + (end-start)/2
	switch {
	case op.Name == "reset_signals":
		if r.reset == nil {
			r.reset = map[int]bool{}
		}
		r.reset[op.Window] = true
	case op.Wait:
		if !completed || op.Peer < 0 || r.reset[op.Window] || (op.Cmp != transport.CmpGe && op.Cmp != transport.CmpEq) {
			return
		}
		id := flowID(flowKey{op.Window, op.Peer, r.rank, op.Slot}, op.Value)
		r.ends = append(r.ends, &event{name: flowName, cat: flowCat, ph: PhaseFlowEnd, ts: mid, tid: TIDStream, id: id, bindEnclosing: true})
	default:
		if r.posted == nil {
			r.posted = map[flowKey]uint64{}
		}
		to := []int{op.Peer}
		if op.Peer < 0 { // signal_all
			to = to[:0]
			for p := 0; p < r.size; p++ {
				if p != r.rank {
					to = append(to, p)
				}
			}
		}
		for _, p := range to {
			k := flowKey{op.Window, r.rank, p, op.Slot}
			v := r.posted[k] + op.Value
			if op.SigOp == window.SigSet {
				v = op.Value
			}
			r.posted[k] = v
			r.appendLocked(&event{name: flowName, cat: flowCat, ph: PhaseFlowStart, ts: mid, tid: TIDStream, id: flowID(k, v)})
		}
	}
}
