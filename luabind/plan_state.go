package luabind

import (
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/window"
)

// planState is a rank's plans: the recorder while lc.plan's body runs,
// each window's ledger, and whether the script runs under luacoll check.
type planState struct {
	rec     *planRecorder
	ledgers map[*window.Window]*plan.Ledger
	// check is set under `luacoll check`: every plan is verified when it
	// is made, and replays are skipped.
	check *checkMode
	// made counts plans made on this rank (the plan's number in reports).
	made int
	// sent is, per window, what this rank's Lua code signalled and
	// counted outside plans (plan.List.Sent's rows).
	sent map[*window.Window][]uint64
	// reset counts, per window, the resets of this rank's inbox, and
	// resetAt says where the last was made (plan_reset.go).
	reset   map[*window.Window]int
	resetAt map[*window.Window]string
	// onDevice are the plans in device mode not freed yet (Close frees
	// their device memory).
	onDevice map[*planRef]bool
	// maxOps and maxTotal, when set, stand for plan.MaxOps and
	// plan.MaxTotalOps (tests).
	maxOps, maxTotal int
}

// limits are the most ops a plan may hold per rank and over all ranks.
func (ps *planState) limits() (perRank, total int) {
	perRank, total = plan.MaxOps, plan.MaxTotalOps
	if ps.maxOps > 0 {
		perRank = ps.maxOps
	}
	if ps.maxTotal > 0 {
		total = ps.maxTotal
	}
	return perRank, total
}

// sentRow returns w's sent rows, made on first use.
func (ps *planState) sentRow(w *window.Window) []uint64 {
	if ps.sent == nil {
		ps.sent = map[*window.Window][]uint64{}
	}
	v := ps.sent[w]
	if v == nil {
		o := w.Options()
		v = make([]uint64, w.Rank().N()*(o.Signals+o.Counters))
		ps.sent[w] = v
	}
	return v
}

// noteSignal accounts an eager signal to peer's slot sig: an add adds v,
// a set makes the row v.
func (ps *planState) noteSignal(w *window.Window, peer, sig int, op window.SignalOp, v uint64) {
	row := &ps.sentRow(w)[peer*w.Options().Signals+sig]
	if op == window.SigSet {
		*row = v
		return
	}
	*row += v
}

// noteCounter accounts an eager add of v to this rank's counter ctr for
// peer, or its reset.
func (ps *planState) noteCounter(w *window.Window, peer, ctr int, v uint64, reset bool) {
	o := w.Options()
	row := &ps.sentRow(w)[w.Rank().N()*o.Signals+peer*o.Counters+ctr]
	if reset {
		*row = 0
		return
	}
	*row += v
}

// sentRows returns a copy of w's sent rows (nil when nothing was sent).
func (ps *planState) sentRows(w *window.Window) []uint64 {
	if v := ps.sent[w]; v != nil {
		return append([]uint64(nil), v...)
	}
	return nil
}

func (ps *planState) ledger(w *window.Window) *plan.Ledger {
	if ps.ledgers == nil {
		ps.ledgers = map[*window.Window]*plan.Ledger{}
	}
	l := ps.ledgers[w]
	if l == nil {
		l = &plan.Ledger{}
		ps.ledgers[w] = l
	}
	return l
}
