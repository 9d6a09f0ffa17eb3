package verify

import (
	"sort"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// holding returns the earliest write after which the slot met the
// condition for good (">=" and ">": the first write that made it hold),
// or the last write for other comparisons; nil when the slot held the
// condition before any write (">=" and ">") or was never written.
func holding(sl *slot, cmp transport.Cmp, v uint64) *hist {
	if i := holdingIdx(sl, cmp, v); i >= 0 {
		return &sl.hist[i]
	}
	return nil
}

func holdingIdx(sl *slot, cmp transport.Cmp, v uint64) int {
	if len(sl.hist) == 0 {
		return -1
	}
	if cmp == transport.CmpGe || cmp == transport.CmpGt {
		if cmp.Holds(sl.init, v) {
			return -1
		}
		i := sort.Search(len(sl.hist), func(i int) bool { return cmp.Holds(sl.hist[i].val, v) })
		if i < len(sl.hist) {
			return i
		}
	}
	return len(sl.hist) - 1
}

// forget drops the writes of a slot before write i, which no later wait
// needs: its waits are all ">=" or ">" with targets that never go down
// (sim.monotone), so each is met at i or after. Their clocks are what
// the verifier's memory is mostly made of.
func forget(sl *slot, i int) {
	if i <= 0 {
		return
	}
	clear(sl.hist[:i])
	sl.hist = sl.hist[i:]
	if cap(sl.hist) > 64 && len(sl.hist) < cap(sl.hist)/4 {
		sl.hist = append([]hist(nil), sl.hist...)
	}
}

func (s *sim) barrierStores(r int, st *rankState, o *plan.Op) {
	at := s.snapshot(st)
	if o.Kind == plan.Barrier {
		st.epoch[o.Bar]++
		e := st.epoch[o.Bar]
		for p := 0; p < s.n; p++ {
			if p != r {
				sl := &s.bar[s.barIdx(p, r, o.Bar)]
				sl.val = e
				sl.hist = append(sl.hist, hist{val: e, at: at})
			}
		}
		return
	}
	st.pepoch[o.Bar*s.n+o.Peer]++
	if o.Peer != r {
		e := st.pepoch[o.Bar*s.n+o.Peer]
		sl := &s.pbar[s.barIdx(o.Peer, r, o.Bar)]
		sl.val = e
		sl.hist = append(sl.hist, hist{val: e, at: at})
	}
}

func (s *sim) barrierWait(r int, st *rankState, o *plan.Op) bool {
	if o.Kind == plan.BarrierPeer {
		if o.Peer == r {
			return true
		}
		e := st.pepoch[o.Bar*s.n+o.Peer]
		sl := &s.pbar[s.barIdx(r, o.Peer, o.Bar)]
		if sl.val < e {
			return false
		}
		i := holdingIdx(sl, transport.CmpGe, e)
		if i >= 0 {
			s.join(st, sl.hist[i].at)
			forget(sl, i)
		}
		return true
	}
	e := st.epoch[o.Bar]
	for p := 0; p < s.n; p++ {
		if p != r && s.bar[s.barIdx(r, p, o.Bar)].val < e {
			return false
		}
	}
	for p := 0; p < s.n; p++ {
		if p != r {
			sl := &s.bar[s.barIdx(r, p, o.Bar)]
			if i := holdingIdx(sl, transport.CmpGe, e); i >= 0 {
				s.join(st, sl.hist[i].at)
				forget(sl, i)
			}
		}
	}
	return true
}
