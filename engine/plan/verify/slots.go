package verify

import (
	"sort"

	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
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
func (s *sim) forget(sl *slot, i int) {
	if i <= 0 {
		return
	}
	for _, h := range sl.hist[:i] {
		if h.at != nil {
			s.release(h.at.vc)
		}
	}
	rest := len(sl.hist) - i
	switch {
	case cap(sl.hist) > 64 && rest < cap(sl.hist)/4:
		// A large array mostly let go: what is left moves to a new one.
		sl.hist = append([]hist(nil), sl.hist[i:]...)
	case rest <= i:
		// Few are left: move them to the front, so that the row's next
		// writes reuse its array (a row written and waited on in turn
		// would otherwise take a new one at every write).
		copy(sl.hist, sl.hist[i:])
		clear(sl.hist[rest:])
		sl.hist = sl.hist[:rest]
	default:
		clear(sl.hist[:i])
		sl.hist = sl.hist[i:]
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
				s.appendHist(sl, hist{val: e, at: at})
				s.keep(at)
			}
		}
		return
	}
	st.pepoch[o.Bar*s.n+o.Peer]++
	if o.Peer != r {
		e := st.pepoch[o.Bar*s.n+o.Peer]
		sl := &s.pbar[s.barIdx(o.Peer, r, o.Bar)]
		sl.val = e
		s.appendHist(sl, hist{val: e, at: at})
		s.keep(at)
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
			s.forget(sl, i)
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
				s.forget(sl, i)
			}
		}
	}
	return true
}

// signal writes o's signal from rank from (whose state is st) into rank
// to's row. The write carries the sender's clock (*at, taken once for all
// of an op's writes) where a wait may join it: on a monotone row, only a
// write that first meets one of the row's wait targets.
func (s *sim) signal(from, to int, o *plan.Op, st *rankState, at **snap, by *opRef) {
	idx := s.sigIdx(to, from, o.Sig)
	sl := &s.sig[idx]
	old := sl.val
	if o.SigOp == window.SigSet {
		sl.val = o.SigValue
	} else {
		sl.val += o.SigValue
	}
	var kept *snap
	if s.joinable(idx, old, sl.val) {
		if *at == nil {
			*at = s.snapshot(st)
		}
		kept = *at
	}
	s.appendHist(sl, hist{val: sl.val, at: kept, by: by})
	s.keep(kept)
}

// joinable reports whether a write raising row idx from old to val can be
// what a wait joins: on a monotone row, the first write to meet one of
// its waits' targets (a ">=" or ">" wait joins the first write that makes
// it hold); on any other row, every write. At a thousand ranks, a clock
// kept for every write of a row waited on once at the end was most of the
// verifier's memory.
func (s *sim) joinable(idx int, old, val uint64) bool {
	if !s.monotone[idx] {
		return true
	}
	ts := s.targets[idx]
	k := sort.Search(len(ts), func(i int) bool { return ts[i] > old })
	return k < len(ts) && ts[k] <= val
}

// wait reports whether rank r's wait o holds now (joining what it
// synchronizes with).
func (s *sim) wait(r int, st *rankState, o *plan.Op, v uint64) bool {
	switch o.Kind {
	case plan.WaitSignalFrom:
		sl := &s.sig[s.sigIdx(r, o.Peer, o.Sig)]
		if !o.Cmp.Holds(sl.val, v) {
			return false
		}
		i := holdingIdx(sl, o.Cmp, v)
		if i >= 0 {
			s.joinWrite(r, st, sl, i)
			if s.monotone[s.sigIdx(r, o.Peer, o.Sig)] {
				s.forget(sl, i)
			}
		}
	case plan.WaitSignal:
		var sum uint64
		for p := 0; p < s.n; p++ {
			sum += s.sig[s.sigIdx(r, p, o.Sig)].val
		}
		if !o.Cmp.Holds(sum, v) {
			return false
		}
		if !s.sumJoin(r, st, o, v) {
			for p := 0; p < s.n; p++ {
				sl := &s.sig[s.sigIdx(r, p, o.Sig)]
				if len(sl.hist) > 0 {
					s.joinWrite(r, st, sl, len(sl.hist)-1)
				}
			}
		}
	case plan.WaitCounter:
		k := &st.ctr[o.Peer*s.sh.Counters+o.Ctr]
		if !o.Cmp.Holds(k.val, v) {
			return false
		}
		// The puts whose counts the wait needed have completed locally.
		// They complete in no set order: a put is known complete when the
		// others' counts (those before a reset that may still land
		// included) cannot reach the value without it.
		c := st.vc[r] + 1 // the clock this op gets
		need, ge := v, o.Cmp == transport.CmpGe || o.Cmp == transport.CmpGt
		if o.Cmp == transport.CmpGt {
			need = v + 1
		}
		total := k.val + k.stale
		for _, e := range k.hist {
			if ge && total-e.add >= need {
				continue // the others could have met the wait
			}
			if e.x.src.done == 0 {
				e.x.src.done = c
			}
			if e.x.local && e.x.dst.done == 0 {
				e.x.dst.done = c
			}
		}
	}
	return true
}

// histCarve is the room a slot's first write gets in its list of writes,
// cut from a shared array (histSlab entries at a time) rather than
// allocated: at a thousand ranks a barrier writes a million slots.
const (
	histCarve = 2
	histSlab  = 4096
)

// appendHist adds h to sl's writes.
func (s *sim) appendHist(sl *slot, h hist) {
	if cap(sl.hist) == 0 {
		if len(s.hists) < histCarve {
			s.hists = make([]hist, histSlab)
		}
		sl.hist = s.hists[:0:histCarve]
		s.hists = s.hists[histCarve:]
	}
	sl.hist = append(sl.hist, h)
}

// slab hands out zeroed values cut from arrays of slabLen: one allocation
// for many of the simulation's small records, which live about as long
// as one another (a record keeps its whole array alive).
type slab[T any] struct{ free []T }

const slabLen = 1024

func (b *slab[T]) new() *T {
	if len(b.free) == 0 {
		b.free = make([]T, slabLen)
	}
	p := &b.free[0]
	b.free = b.free[1:]
	return p
}
