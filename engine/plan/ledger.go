package plan

import "github.com/luacoll/luacoll/window"

// Replays that repeat forever.
//
// A schedule written in Lua counts its signals itself: ring() waits for
// "one more than last time" from its left neighbour, using a count kept in
// the Lua module. Recording runs the body once, so the recorded wait values
// are right for the first replay only. Every replay of a plan adds the same
// amount to each inbox row (and counter) of every rank, and that amount is
// known once every rank's list is known (Deltas). A replay therefore waits
// for the recorded value plus what replays of the window's plans added to
// the row since, less what their recordings had the Lua code count: the
// Ledger keeps both sums per row. Barrier epochs need none of this: the
// window keeps them and every replayed barrier raises them.

// RowInfo is what one replay of every rank's list does to one rank's
// ledger rows (Shape.SigRow, Shape.CtrRow): Delta[row] is what it adds,
// Set[row] says a rank writes the row with a "set" signal (waits on it
// cannot tell one replay from the next), Reset[row] that the rank resets
// the counter (waits on it count from the reset, in every replay alike;
// its Delta is 0).
type RowInfo struct {
	Delta      []uint64
	Set, Reset []bool
}

// Deltas returns every rank's RowInfo, in one pass over the lists.
func Deltas(lists []List) []RowInfo {
	n := len(lists)
	out := make([]RowInfo, n)
	for q := range lists {
		rows := lists[q].Shape.Rows()
		out[q] = RowInfo{Delta: make([]uint64, rows), Set: make([]bool, rows), Reset: make([]bool, rows)}
	}
	for sender, l := range lists {
		for _, o := range l.Ops {
			if o.Kind.HasSignal() {
				hit := func(q int) {
					s := lists[q].Shape
					if o.Sig < 0 || o.Sig >= s.Signals || sender >= s.Ranks {
						return
					}
					row := s.SigRow(sender, o.Sig)
					if o.SigOp == window.SigSet {
						out[q].Set[row] = true
					} else {
						out[q].Delta[row] += o.SigValue
					}
				}
				if o.Kind == SignalAll {
					for q := 0; q < n; q++ {
						if q != sender {
							hit(q)
						}
					}
				} else if o.Peer >= 0 && o.Peer < n {
					hit(o.Peer)
				}
				continue
			}
			s := l.Shape
			if o.Peer < 0 || o.Peer >= n || o.Ctr < 0 || o.Ctr >= s.Counters {
				continue
			}
			row := s.CtrRow(o.Peer, o.Ctr)
			switch {
			case o.Kind == ResetCounter:
				out[sender].Reset[row] = true
			case o.Kind.HasCounter():
				out[sender].Delta[row] += o.CtrValue
			}
		}
	}
	for q := range out {
		for row, r := range out[q].Reset {
			if r {
				out[q].Delta[row] = 0
			}
		}
	}
	return out
}

// WaitRows returns the ledger rows whose sum a wait op compares (nil for
// other ops): the sender's row for wait_signal_from, every sender's row for
// wait_signal, the counter's row for wait_counter.
func (s Shape) WaitRows(o Op) []int {
	switch o.Kind {
	case WaitSignalFrom:
		return []int{s.SigRow(o.Peer, o.Sig)}
	case WaitSignal:
		rows := make([]int, s.Ranks)
		for r := range rows {
			rows[r] = s.SigRow(r, o.Sig)
		}
		return rows
	case WaitCounter:
		return []int{s.CtrRow(o.Peer, o.Ctr)}
	}
	return nil
}

// Ledger is a window's account, kept alike on every rank, of what its
// plans' recordings had the recording code count on each rank's rows
// (Recorded[rank][row], one body's worth per plan), and, for this rank,
// what replays added to its rows (Replayed[row]).
type Ledger struct {
	Recorded [][]uint64
	Replayed []uint64
}

// Record notes a new plan of every rank's lists: it sets each list's Base
// to the counts the recording code saw when it began, and adds what the
// plan's body counted. Every rank records the same lists in the same
// order, so their ledgers agree.
func (l *Ledger) Record(lists []List, me int) {
	d := Deltas(lists)
	if len(l.Recorded) != len(lists) {
		l.Recorded = make([][]uint64, len(lists))
	}
	for q := range lists {
		rows := lists[q].Shape.Rows()
		if len(l.Recorded[q]) != rows {
			l.Recorded[q] = make([]uint64, rows)
		}
		lists[q].Base = append([]uint64(nil), l.Recorded[q]...)
		for row, v := range d[q].Delta {
			l.Recorded[q][row] += v
		}
	}
	if rows := lists[me].Shape.Rows(); len(l.Replayed) != rows {
		l.Replayed = make([]uint64, rows)
	}
}
