package plan

import (
	"sort"

	"github.com/luacoll/luacoll/kernels"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// Lines: a put_signal whose payload and signal travel in 16-byte lines, 8
// bytes of payload and a flag each.
//
// A put_signal enqueued as a put and a signal is two stores and a release
// between them, and on a GPU the release waits for the data store to be
// acknowledged: about as long as the raw flag's whole hop. In a line
// (lc_ll_store: {data low, flag, data high, flag}) no store of the data can
// be seen without its flag, so the sender needs no release; the receiver
// polls its lines, writes the payload into its window and adds the signal
// to its own slot, in program order, before the wait that needs it. Up to
// 8 bytes (one line) thread 0 of the interpreter sends and drains it; a
// larger one, up to the knob's size, every thread its share of the lines.
//
// That changes who writes the slot, so a put_signal goes in a line only
// where nothing can tell: every rank replays the plan through the
// interpreter (CUDA, no network peer: the caller checks), the receiver's
// own list has a wait that cannot complete in the same replay without this
// signal (so the line is always drained, by that wait), and the sender's
// list writes nothing else a peer could read (the release of a signal
// covers every earlier write of the sender, a line only its own payload).

// knobs.PlanLines is the largest put_signal that goes in lines, 0 none
// (the caller reads it: LineLimit unless set).

// LineRef names op Op of rank Sender's list.
type LineRef struct{ Sender, Op int }

// LineInfo places a put_signal that goes in lines: Count lines from line
// Index of the receiver's line area (16 bytes each), drained just before
// the receiver's op Drain (a wait).
type LineInfo struct {
	Receiver, Index, Count, Drain int
}

// LineCount is the lines a put_signal of n bytes takes.
func LineCount(n uint64) int { return int((n + 7) / 8) }

// LineLimit is the largest put_signal that goes in lines in a plan of
// ranks ranks unless knobs.PlanLines says otherwise.
func LineLimit(ranks int) uint64 {
	if ranks > 2 {
		return kernels.PlanLineMaxMany
	}
	return kernels.PlanLineMax
}

// LineSize is the bytes of one line.
const LineSize = 16

// Lines returns the put_signals of lists of up to limit bytes that go in
// lines, and how many lines the rank with the most needs (the line area every rank allocates
// is that many lines). The answer depends on the lists only: every rank
// computes the same.
//
// A line is drained by the first wait of the receiver that cannot
// complete without it: its target, less what its rows hold when the
// replay starts, exceeds all that one replay adds to its other rows plus
// what the sender adds to this row before the line. Every wait on a row
// with lines drains the lines it needs before it polls, so no wait spins
// on a slot that only a drain can raise. A line that no wait needs is sent
// as a put and a release.
func Lines(lists []List, limit uint64) (map[LineRef]LineInfo, int) {
	ls := planLines(lists, limit)
	return ls.lines, ls.most
}

// lineSet is Lines' answer with, per rank, the waits its drains satisfy
// on their own (covered: every unit their rows get comes in lines, and
// the drains before them bring what they wait for), which need not poll.
type lineSet struct {
	lines   map[LineRef]LineInfo
	most    int
	covered map[LineRef]bool
}

// lineCand is a line-shaped put_signal into one row of a rank's inbox.
type lineCand struct {
	ref    LineRef
	before uint64 // what the sender adds to the row before it, per replay
	value  uint64
	drain  int // the receiver's wait that drains it, or -1
}

// waitInfo is one ">=" wait on signal rows: its op, rows, and what one
// replay must add to them for it to complete.
type waitInfo struct {
	op     int
	rows   []int
	target uint64
	all    uint64 // what one replay adds to its rows, all senders
}

func planLines(lists []List, limit uint64) lineSet {
	deltas := Deltas(lists)
	cands := lineCandidates(lists, limit)
	out := lineSet{lines: map[LineRef]LineInfo{}, covered: map[LineRef]bool{}}
	for q := range lists {
		if len(cands[q]) == 0 {
			continue
		}
		waits := receiverWaits(lists, q, deltas[q], cands[q])
		assignDrains(cands[q], waits, deltas[q])
		// Lines in the order of their rows, then the senders' order.
		rows := make([]int, 0, len(cands[q]))
		for r := range cands[q] {
			rows = append(rows, r)
		}
		sort.Ints(rows)
		idx := 0
		for _, r := range rows {
			for _, c := range cands[q][r] {
				if c.drain < 0 {
					continue
				}
				k := LineCount(lists[c.ref.Sender].Ops[c.ref.Op].N)
				out.lines[c.ref] = LineInfo{Receiver: q, Index: idx, Count: k, Drain: c.drain}
				idx += k
			}
		}
		out.most = max(out.most, idx)
		for _, w := range waits {
			drained, lines := lineSums(cands[q], w)
			if lines > 0 && lines == w.all && w.target <= drained {
				out.covered[LineRef{q, w.op}] = true
			}
		}
	}
	return out
}

// lineCandidates returns, per receiver and signal row, the put_signals
// that could travel in lines (up to limit bytes): adds whose sender writes
// nothing else a peer could read, with what the sender added to the row
// before each.
func lineCandidates(lists []List, limit uint64) []map[int][]*lineCand {
	n := len(lists)
	cands := make([]map[int][]*lineCand, n)
	for q := range cands {
		cands[q] = map[int][]*lineCand{}
	}
	for s, l := range lists {
		quiet := writesOnlyLines(lists, s, limit)
		added := map[[2]int]uint64{} // (receiver, row) -> what s added so far
		for j, o := range l.Ops {
			if !o.Kind.HasSignal() || o.SigOp != window.SigAdd {
				continue
			}
			for q := 0; q < n; q++ {
				if q == s || !(o.Peer == q || o.Kind == SignalAll) {
					continue
				}
				sh := lists[q].Shape
				if o.Sig < 0 || o.Sig >= sh.Signals || s >= sh.Ranks {
					continue
				}
				key := [2]int{q, sh.SigRow(s, o.Sig)}
				if quiet && lineShaped(o, s, n, limit) {
					cands[q][key[1]] = append(cands[q][key[1]], &lineCand{ref: LineRef{s, j}, before: added[key], value: o.SigValue})
				}
				added[key] += o.SigValue
			}
		}
	}
	return cands
}

// receiverWaits returns receiver q's ">=" waits on signal rows, with the
// targets one replay must reach, and drops from cands the rows a wait
// reads other than with ">=" or that are written with "set".
func receiverWaits(lists []List, q int, delta RowInfo, cands map[int][]*lineCand) []waitInfo {
	n := len(lists)
	l := lists[q]
	sh := l.Shape
	var waits []waitInfo
	for i, w := range l.Ops {
		if !w.Kind.IsWait() || w.Kind == WaitCounter {
			continue
		}
		rows := sh.WaitRows(w)
		wi := waitInfo{op: i, rows: rows}
		var start uint64
		for _, r := range rows {
			// A row that a wait reads other than with ">=", or that is
			// written with "set", keeps its put_signals out of lines.
			if w.Cmp != transport.CmpGe || delta.Set[r] {
				delete(cands, r)
			}
			if len(l.Base) == sh.Rows() {
				start += l.Base[r]
			}
			wi.all += delta.Delta[r]
			// What the senders' code sent eagerly before recording (the
			// slot holds it; the recorded target counts it).
			if sender := r / sh.Signals; sender < n && len(lists[sender].Sent) == lists[sender].Shape.Rows() {
				start += lists[sender].Sent[lists[sender].Shape.SigRow(q, r%sh.Signals)]
			}
		}
		if w.Cmp == transport.CmpGe {
			if w.Value > start {
				wi.target = w.Value - start // as Plan.value moves both by the replays
			}
			waits = append(waits, wi)
		}
	}
	return waits
}

// assignDrains gives each line to the first wait that needs it; then
// drops the lines of every row a wait reads that could need a line drained
// only after it (it would spin on a slot only that drain raises), and
// again until no wait can.
func assignDrains(cands map[int][]*lineCand, waits []waitInfo, delta RowInfo) {
	for {
		for _, cs := range cands {
			for _, c := range cs {
				c.drain = -1
			}
		}
		for _, w := range waits {
			for _, r := range w.rows {
				others := w.all - delta.Delta[r]
				for _, c := range cands[r] {
					if c.drain < 0 && w.target > others+c.before {
						c.drain = w.op
					}
				}
			}
		}
		dropped := false
		for _, w := range waits {
			drained, lines := lineSums(cands, w)
			if lines > 0 && w.target > drained+(w.all-lines) {
				for _, r := range w.rows {
					delete(cands, r)
				}
				dropped = true
			}
		}
		if !dropped {
			return
		}
	}
}

// lineSums returns what the lines on wait w's rows add per replay: those
// drained by w or a wait before it, and all of them.
func lineSums(cands map[int][]*lineCand, w waitInfo) (drained, lines uint64) {
	for _, r := range w.rows {
		for _, c := range cands[r] {
			if c.drain >= 0 {
				lines += c.value
				if c.drain <= w.op {
					drained += c.value
				}
			}
		}
	}
	return drained, lines
}

// lineShaped reports whether op o of rank s has lines' shape: a
// put_signal (no counter) of 1 to limit bytes to another rank, adding a
// value that fits 32 bits.
func lineShaped(o Op, s, n int, limit uint64) bool {
	return o.Kind == PutSignal && o.N >= 1 && o.N <= limit && o.SigOp == window.SigAdd && o.Peer != s &&
		o.Peer >= 0 && o.Peer < n && o.SigValue > 0 && o.SigValue < 1<<32
}

// writesOnlyLines reports whether the only writes of rank s's list that
// another rank could read are put_signals of lines' shape (up to limit
// bytes): no other put
// (to any rank, itself included when a peer reads its window), and no
// fill, get or reduction into its window when a peer reads it (get,
// reduce_from).
func writesOnlyLines(lists []List, s int, limit uint64) bool {
	n := len(lists)
	gotFrom := false
	for q, l := range lists {
		for _, o := range l.Ops {
			if q != s && o.Kind.ReadsPeer() && o.Peer == s {
				gotFrom = true
			}
		}
	}
	for _, o := range lists[s].Ops {
		switch {
		case o.Kind == PutSignal && lineShaped(o, s, n, limit):
		case o.Kind.IsPut():
			if o.Peer != s || gotFrom {
				return false
			}
		case o.Kind.WritesBuf() && o.Buf == WindowBuf && gotFrom:
			return false
		}
	}
	return true
}
