package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/luacoll/luacoll/transport"
)

// The waits a window enqueues, as transport.WaitNote.Op; A, B, C are
// their arguments in the order of the names.
const (
	noteWaitSignal     uint8 = iota // sig
	noteWaitSignalFrom              // peer, sig
	noteWaitCounter                 // peer, ctr
	noteBarrier                     // id, epoch
	noteBarrierPeer                 // peer, id, epoch
)

// note describes a wait for its error, with where it was enqueued.
func (w *Window) note(op uint8, a, b, c uint64) transport.WaitNote {
	at := w.r.site()
	return transport.WaitNote{Op: op, A: a, B: b, C: c, File: at.File, Line: at.Line}
}

// noteOp names the wait n describes, e.g. "wait_signal_from(peer 1, sig 0)".
func noteOp(n transport.WaitNote) string {
	switch n.Op {
	case noteWaitSignal:
		return fmt.Sprintf("wait_signal(sig %d, sum over all peers)", n.A)
	case noteWaitSignalFrom:
		return fmt.Sprintf("wait_signal_from(peer %d, sig %d)", n.A, n.B)
	case noteWaitCounter:
		return fmt.Sprintf("wait_counter(peer %d, ctr %d)", n.A, n.B)
	case noteBarrier:
		return fmt.Sprintf("barrier(id %d, epoch %d, every peer)", n.A, n.B)
	case noteBarrierPeer:
		return fmt.Sprintf("barrier_peer(peer %d, id %d, epoch %d)", n.A, n.B, n.C)
	}
	return fmt.Sprintf("wait(%d)", n.Op)
}

// WaitOpName names a wait as the window's errors do, for waits that run
// elsewhere (a plan's kernel): method is the Lua method (wait_signal,
// wait_signal_from, wait_counter, barrier, barrier_peer), id its signal,
// counter or barrier slot, epoch a barrier's.
func WaitOpName(method string, peer, id int, epoch uint64) string {
	p, i := uint64(peer), uint64(id)
	switch method {
	case "wait_signal":
		return noteOp(transport.WaitNote{Op: noteWaitSignal, A: i})
	case "wait_signal_from":
		return noteOp(transport.WaitNote{Op: noteWaitSignalFrom, A: p, B: i})
	case "wait_counter":
		return noteOp(transport.WaitNote{Op: noteWaitCounter, A: p, B: i})
	case "barrier":
		return noteOp(transport.WaitNote{Op: noteBarrier, A: i, B: epoch})
	case "barrier_peer":
		return noteOp(transport.WaitNote{Op: noteBarrierPeer, A: p, B: i, C: epoch})
	}
	return method
}

// describeWait is the Describe of every wait of the window: the
// WaitError naming the operation, the condition, where it was enqueued
// and the last value seen. It is made once per window, so enqueuing a
// wait allocates nothing for its error.
func (w *Window) describeWait(ws transport.WaitSpec, observed uint64, cause error) error {
	op, cond := noteOp(ws.Note), fmt.Sprintf("%s %d", ws.Cmp, ws.Value)
	where := ""
	if site := (Site{File: ws.Note.File, Line: ws.Note.Line}).String(); site != "" {
		where = " (enqueued at " + site + ")"
	}
	e := w.waitFailed(op, cond, where, observed, ws.Timeout, cause)
	if errors.Is(cause, transport.ErrTimeout) {
		if ranks := w.noteRanks(ws.Note); ranks != nil && len(ws.Slots) > 1 {
			e.Rows = w.suspects(ws.Slots, ranks, ws.Mode, ws.Cmp, ws.Value)
		}
	}
	return e
}

// waitFailed is the error of a wait of this window that did not succeed,
// also for waits that run elsewhere (Raw.WaitFailed): op names it
// ("wait_signal_from(peer 1, sig 0)"), cond is its condition (">= 5"),
// where says where it came from (" (enqueued at x.lua:3)"), cause is
// transport.ErrTimeout or why it was aborted.
func (w *Window) waitFailed(op, cond, where string, observed uint64, timeout time.Duration, cause error) *WaitError {
	if errors.Is(cause, transport.ErrTimeout) {
		msg := fmt.Sprintf("timed out after %v", timeout)
		if h := transport.HintOf(cause); h != "" {
			msg += " (" + h + ")"
		}
		return &WaitError{Rank: w.r.ID(), Window: w.id, Op: op, Cond: cond, Observed: observed, Msg: msg, Where: where}
	}
	msg := "aborted: "
	var pe *transport.PeerEndedError
	if errors.As(cause, &pe) {
		msg = "can never hold: "
	}
	return &WaitError{Rank: w.r.ID(), Window: w.id, Op: op, Cond: cond, Observed: observed,
		Msg: msg + cause.Error(), Where: where, Cause: cause}
}

// noteRanks returns the peer behind each slot of the wait n describes,
// for waits on more than one slot (nil otherwise): a timeout then names
// the peer that held it up.
func (w *Window) noteRanks(n transport.WaitNote) []int {
	switch n.Op {
	case noteWaitSignal:
		return w.allRanks()
	case noteBarrier:
		me, nr := w.r.ID(), w.r.N()
		out := make([]int, 0, nr-1)
		for i := 1; i < nr; i++ {
			out = append(out, (me+i)%nr)
		}
		return out
	}
	return nil
}
