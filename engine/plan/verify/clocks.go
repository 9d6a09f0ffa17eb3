package verify

import "slices"

// Vector clocks: each rank's, the snapshots its signals and barrier
// stores carry, and their joins when a wait sees them.

func (s *sim) tick(st *rankState, r int) uint32 {
	st.vc[r]++
	return st.vc[r]
}

func (s *sim) snapshot(st *rankState) *snap {
	r := st.me
	if st.pub == nil || st.stale {
		s.work += len(st.vc)
		s.release(st.pub)
		st.pub, st.stale = s.copyClock(st.vc), false
	}
	at := s.snaps.new()
	*at = snap{vc: st.pub, own: st.vc[r], rank: r, depth: st.depth}
	return at
}

// copyClock returns a copy of vc that one holds.
func (s *sim) copyClock(vc []uint32) *clock {
	if k := len(s.spare); k > 0 {
		c := s.spare[k-1]
		s.spare[k-1] = nil
		s.spare = s.spare[:k-1]
		copy(c.vc, vc)
		c.refs = 1
		return c
	}
	return &clock{vc: slices.Clone(vc), refs: 1}
}

// keep notes that a slot write holds snapshot at (nil: none).
func (s *sim) keep(at *snap) {
	if at != nil {
		at.vc.refs++
	}
}

// release drops a hold of c (nil: none); at none, it is spare.
func (s *sim) release(c *clock) {
	if c == nil {
		return
	}
	if c.refs--; c.refs == 0 {
		s.spare = append(s.spare, c)
	}
}

// join notes that rank st's current op synchronizes with the write at;
// joinAll then merges what the op synchronized with into st's clock and
// depth (after the op's own depth step).
func (s *sim) join(st *rankState, at *snap) {
	if at != nil {
		st.joins = append(st.joins, at)
	}
}

// joinWrite joins rank r's current op (a wait on its own inbox) with
// write i of signal row sl: r has seen it and, since the row counts them,
// every earlier write, so the puts those put_signals carried have landed
// and read their sources, as of the clock this op gets.
func (s *sim) joinWrite(r int, st *rankState, sl *slot, i int) {
	s.join(st, sl.hist[i].at)
	c := st.vc[r] + 1
	for j := i; j >= 0 && !sl.hist[j].seen; j-- {
		h := &sl.hist[j]
		h.seen = true // and every earlier one: a walk stops at it
		if h.put != nil {
			h.put.src.seenBy, h.put.src.seenAt = r, c
			h.put.dst.seenBy, h.put.dst.seenAt = r, c
			h.put = nil
		}
	}
}

func (s *sim) joinAll(st *rankState) {
	s.work += len(st.joins) * len(st.vc)
	for _, at := range st.joins {
		if joinClock(st.vc, at.vc.vc) {
			st.stale = true
		}
		if at.own > st.vc[at.rank] {
			st.vc[at.rank] = at.own
			st.stale = true
		}
		st.depth = max(st.depth, at.depth+1)
	}
	st.joins = st.joins[:0]
}

// joinClock raises vc to at least at, entry by entry, and reports
// whether any entry rose. Branch-free: the entries that rise follow no
// pattern a branch predictor learns, and this loop is most of a
// thousand ranks' verification.
func joinClock(vc, at []uint32) bool {
	at = at[:len(vc)]
	k, up := joinVector(vc, at) // 8 entries an instruction where the CPU can
	var rose uint32
	for i := k; i < len(vc); i++ {
		v := vc[i]
		m := max(v, at[i])
		rose |= m ^ v
		vc[i] = m
	}
	return up || rose != 0
}
