package plan

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

// Deltas returns, for rank me, what one replay of every rank's list adds to
// each of me's ledger rows (Shape.SigRow, Shape.CtrRow), which rows some
// rank writes with a "set" signal (their waits cannot be told apart from
// one replay to the next), and which counter rows me resets (waits on them
// count from the reset, in every replay alike).
func Deltas(lists []List, me int) (delta []uint64, set, reset []bool) {
	s := lists[me].Shape
	delta = make([]uint64, s.Rows())
	set = make([]bool, s.Rows())
	reset = make([]bool, s.Rows())
	n := len(lists)
	for sender, l := range lists {
		for _, o := range l.Ops {
			if !o.Kind.hasSignal() {
				continue
			}
			hit := false
			if o.Kind == SignalAll {
				hit = sender != me
			} else {
				hit = o.Peer == me
			}
			if !hit || o.Sig < 0 || o.Sig >= s.Signals || sender >= n {
				continue
			}
			row := s.SigRow(sender, o.Sig)
			if o.SigOp == 1 { // set
				set[row] = true
			} else {
				delta[row] += o.SigValue
			}
		}
	}
	for _, o := range lists[me].Ops {
		if o.Peer < 0 || o.Peer >= n || o.Ctr < 0 || o.Ctr >= s.Counters {
			continue
		}
		row := s.CtrRow(o.Peer, o.Ctr)
		switch {
		case o.Kind == ResetCounter:
			reset[row] = true
		case o.Kind.hasCounter():
			delta[row] += o.CtrValue
		}
	}
	for row := range delta {
		if reset[row] {
			delta[row] = 0
		}
	}
	return delta, set, reset
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

// Ledger is one rank's account of a window's rows across its plans:
// Replayed[row] is what replays of the window's plans added to the row,
// Recorded[row] what their recordings had the recording code count (one
// body's worth per plan). The zero Ledger is ready for a window of rows
// rows once Init is called.
type Ledger struct {
	Replayed []uint64
	Recorded []uint64
}

// Init sizes a fresh ledger.
func (l *Ledger) Init(rows int) {
	if len(l.Replayed) != rows {
		l.Replayed = make([]uint64, rows)
		l.Recorded = make([]uint64, rows)
	}
}

// Record notes a plan recorded with per-replay deltas delta and returns
// the rows' counts as the recording code saw them when it began (what the
// plan's List.Base is).
func (l *Ledger) Record(delta []uint64) []uint64 {
	base := append([]uint64(nil), l.Recorded...)
	for i, d := range delta {
		l.Recorded[i] += d
	}
	return base
}
