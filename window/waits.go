package window

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/transport"
)

// WaitError is a wait that did not succeed: it timed out or was aborted.
type WaitError struct {
	Rank, Window int
	Op           string // e.g. "wait_signal(sig 2)"
	Cond         string // e.g. ">= 3"
	Observed     uint64
	Msg          string
	Where        string
	Cause        error
	// Rows, for a wait on several peers' slots, says where each stood
	// when it timed out and which peer held it up.
	Rows string
}

func (e *WaitError) Error() string {
	msg := fmt.Sprintf("rank %d: window %d: %s %s%s: %s; last value seen %d",
		e.Rank, e.Window, e.Op, e.Cond, e.Where, e.Msg, e.Observed)
	if e.Rows != "" {
		msg += "; " + e.Rows
	}
	return msg
}

func (e *WaitError) Unwrap() error { return e.Cause }

// wait enqueues a wait; note describes it for an error, which is made only
// then (no formatting, and no allocation, on the hot path).
// writers names the rank behind each slot (nil: none that can end).
func (w *Window) wait(note transport.WaitNote, slots []transport.Addr, writers []int, mode transport.WaitMode, cmp transport.Cmp, v uint64) {
	w.r.Stream.Wait(transport.WaitSpec{Slots: slots, Mode: mode, Cmp: cmp, Value: v, Bell: w.local(w.lay.BellOff),
		Timeout: w.opts.Timeout, Describe: w.describe, Note: note, Writers: writers})
}

// suspects reads a timed-out wait's slots and says which peers held it
// up: for a wait on each slot, those whose slot fails the condition; for
// a sum, the peers whose rows are behind the others' (a rank that stopped,
// or is slow, or never got there). "" when the slots cannot be read.
func (w *Window) suspects(slots []transport.Addr, ranks []int, mode transport.WaitMode, cmp transport.Cmp, v uint64) string {
	vals := make([]uint64, len(slots))
	var b [8]byte
	for i, a := range slots {
		if err := w.r.Backend.Read(b[:], a); err != nil {
			return ""
		}
		vals[i] = binary.LittleEndian.Uint64(b[:])
	}
	var parts, behind []string
	lo, hi := ^uint64(0), uint64(0)
	for i, r := range ranks {
		if r != w.r.ID() {
			lo, hi = min(lo, vals[i]), max(hi, vals[i])
		}
	}
	for i, r := range ranks {
		if r == w.r.ID() && vals[i] == 0 {
			continue // its own row of its own inbox: normally unused
		}
		parts = append(parts, fmt.Sprintf("rank %d: %d", r, vals[i]))
		if r == w.r.ID() {
			continue
		}
		if (mode == transport.WaitEach && !cmp.Holds(vals[i], v)) || (mode != transport.WaitEach && lo < hi && vals[i] == lo) {
			behind = append(behind, fmt.Sprint(r))
		}
	}
	msg := "slots by peer: " + strings.Join(parts, ", ")
	switch {
	case len(behind) == 1:
		msg += "; held up by rank " + behind[0] + " (stopped, slow, or not at this step?)"
	case len(behind) > 1:
		msg += "; held up by ranks " + strings.Join(behind, ", ") + " (stopped, slow, or not at this step?)"
	}
	return msg
}

// allRanks is 0..N-1 (the senders of inbox rows).
func (w *Window) allRanks() []int {
	r := make([]int, w.r.N())
	for i := range r {
		r[i] = i
	}
	return r
}

// inboxSlots are the slots of signal sig, one per sender (made at the
// first wait on sig; never changed, so queued waits may share them).
func (w *Window) inboxSlots(sig int) []transport.Addr {
	if w.inSlots == nil {
		w.inSlots = map[int][]transport.Addr{}
	}
	s := w.inSlots[sig]
	if s == nil {
		s = make([]transport.Addr, w.r.N())
		for r := range s {
			s[r] = w.local(w.lay.Inbox(r, sig))
		}
		w.inSlots[sig] = s
	}
	return s
}

// oneSlot is the list of the one slot at offset off of this rank's
// region, made once (queued waits may share it).
func (w *Window) oneSlot(off uint64) []transport.Addr {
	if w.oneSlots == nil {
		w.oneSlots = map[uint64][]transport.Addr{}
	}
	s := w.oneSlots[off]
	if s == nil {
		s = []transport.Addr{w.local(off)}
		w.oneSlots[off] = s
	}
	return s
}

// WaitSignal waits until the sum over all senders of slot sig satisfies cmp v.
func (w *Window) WaitSignal(sig int, cmp transport.Cmp, v uint64) error {
	if err := w.live(); err != nil {
		return err
	}
	if err := w.checkSig("sig", sig); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitSignal, uint64(sig), 0, 0), w.inboxSlots(sig), w.writers.every(w.r.ID(), w.r.N()), transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_signal", start, -1, SlotSignal, sig, cmp, v)
	}
	return nil
}

// WaitSignalFrom waits on one sender's row only.
func (w *Window) WaitSignalFrom(peer, sig int, cmp transport.Cmp, v uint64) error {
	if err := w.live(); err != nil {
		return err
	}
	if peer < 0 || peer >= w.r.N() {
		return argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if err := w.checkSig("sig", sig); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitSignalFrom, uint64(peer), uint64(sig), 0),
		w.oneSlot(w.lay.Inbox(peer, sig)), w.writers.one(w.r.ID(), w.r.N(), peer), transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_signal_from", start, peer, SlotSignal, sig, cmp, v)
	}
	return nil
}

func (w *Window) readLocal(off uint64) (uint64, error) {
	var b [8]byte
	if err := w.r.Backend.Read(b[:], w.local(off)); err != nil {
		return 0, w.errf("read: %v", err)
	}
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56, nil
}

// ReadSignal returns the current sum of slot sig over all senders.
func (w *Window) ReadSignal(sig int) (uint64, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	if err := w.checkSig("sig", sig); err != nil {
		return 0, err
	}
	var sum uint64
	for r := 0; r < w.r.N(); r++ {
		v, err := w.readLocal(w.lay.Inbox(r, sig))
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// ReadSignalFrom returns the current value of one sender's slot sig.
func (w *Window) ReadSignalFrom(peer, sig int) (uint64, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	if peer < 0 || peer >= w.r.N() {
		return 0, argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	if err := w.checkSig("sig", sig); err != nil {
		return 0, err
	}
	return w.readLocal(w.lay.Inbox(peer, sig))
}

func (w *Window) checkCounterArgs(peer, ctr int) error {
	if err := w.live(); err != nil {
		return err
	}
	if peer < 0 || peer >= w.r.N() {
		return argErr("peer", "rank %d is outside 0..%d", peer, w.r.N()-1)
	}
	return w.checkCtr("ctr", ctr)
}

// WaitCounter waits until local counter ctr for peer satisfies cmp v.
func (w *Window) WaitCounter(peer, ctr int, cmp transport.Cmp, v uint64) error {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.wait(w.note(noteWaitCounter, uint64(peer), uint64(ctr), 0),
		w.oneSlot(w.lay.Ctr(peer, ctr)), nil, transport.WaitSum, cmp, v)
	if w.r.Trace != nil {
		w.recordWait("wait_counter", start, peer, SlotCounter, ctr, cmp, v)
	}
	return nil
}

// ReadCounter returns the current value of a local counter.
func (w *Window) ReadCounter(peer, ctr int) (uint64, error) {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return 0, err
	}
	return w.readLocal(w.lay.Ctr(peer, ctr))
}

// ResetCounter enqueues a reset of a local counter to zero.
func (w *Window) ResetCounter(peer, ctr int) error {
	if err := w.checkCounterArgs(peer, ctr); err != nil {
		return err
	}
	start := w.r.traceStart()
	w.r.Stream.Store64(w.local(w.lay.Ctr(peer, ctr)), 0)
	if w.r.Trace != nil {
		o := w.op("reset_counter", start)
		o.Peer, o.Kind, o.Slot = peer, SlotCounter, ctr
		w.r.record(o)
	}
	return nil
}

// ResetSignals enqueues zeroing of this rank's whole inbox.
func (w *Window) ResetSignals() error {
	if err := w.live(); err != nil {
		return err
	}
	start := w.r.traceStart()
	for r := 0; r < w.r.N(); r++ {
		for s := 0; s < w.opts.Signals; s++ {
			w.r.Stream.Store64(w.local(w.lay.Inbox(r, s)), 0)
		}
	}
	if w.r.Trace != nil {
		w.r.record(w.op("reset_signals", start))
	}
	return nil
}
