package cost

import "github.com/luacoll/luacoll/engine/plan"

// Back-to-back replays. A rank that ends a replay begins the next one at
// once, while others may still be in the last one: what a replay takes in
// a loop (as luacoll bench and calibrate time it) can differ from the
// first replay of ranks that all start at 0. Ranks that end apart arrive
// apart at the next replay's first barrier or wait, and ranks that share
// a processor take turns across the replays' boundary.

// repeatLists returns every rank's list with its ops times times over, as
// that many replays run them: a wait of replay j waits for its recorded
// value plus j times what one replay adds to the rows it reads
// (plan.Deltas), except on a row a "set" signal writes or on a counter
// the rank resets (those waits see the same value every replay).
func repeatLists(lists []plan.List, times int) []plan.List {
	info := plan.Deltas(lists)
	out := make([]plan.List, len(lists))
	for r, l := range lists {
		per := make([]uint64, len(l.Ops))
		for i, o := range l.Ops {
			if !o.Kind.IsWait() {
				continue
			}
			for _, row := range l.Shape.WaitRows(o) {
				if info[r].Set[row] || info[r].Reset[row] {
					per[i] = 0
					break
				}
				per[i] += info[r].Delta[row]
			}
		}
		ops := make([]plan.Op, 0, times*len(l.Ops))
		for j := range times {
			for i, o := range l.Ops {
				o.Value += uint64(j) * per[i]
				ops = append(ops, o)
			}
		}
		out[r] = l
		out[r].Ops = ops
	}
	return out
}

// steady returns the time a replay takes in a loop of times replays back
// to back (2 or more): from when the last rank ends the first replay to
// when the last rank ends the last one, over times-1.
func steady(tab [4]Params, in Input, times int) (float64, error) {
	s := newSim(repeatLists(in.Lists, times), tab, in)
	for r, l := range in.Lists {
		s.ranks[r].replayLen = len(l.Ops)
	}
	if err := s.run(); err != nil {
		return 0, err
	}
	var first, last float64
	for r, l := range in.Lists {
		n := len(l.Ops)
		if n == 0 {
			continue
		}
		rk := &s.ranks[r]
		first = max(first, rk.end[n-1])
		last = max(last, rk.end[len(rk.end)-1])
	}
	return (last - first) / float64(times-1), nil
}
