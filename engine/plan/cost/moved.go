package cost

import (
	"github.com/luacoll/luacoll/engine/plan"
	"github.com/luacoll/luacoll/transport"
)

// Bytes another rank wrote. A put into a peer's window leaves its bytes in
// the sender's processor cache; a put or copy that then reads them on the
// peer (a schedule forwarding a chunk, or copying it out of staging) pulls
// them across, and costs the self class's Moved for those bytes beyond
// its own cost, which the calibration measured with data its rank wrote.
// Each rank's window keeps the ranges the last put into them came from
// another rank; a put from the rank's own buffer or a fill of the window
// makes them its own again, and so does a put that read them: its
// processor holds them then (a chunk forwarded, then copied out of
// staging, pays once).

// span is a range of window bytes [lo, hi).
type span struct{ lo, hi uint64 }

// spans are sorted ranges that neither overlap nor touch.
type spans []span

// set marks [lo, hi) as written by another rank (foreign) or not.
func (ss *spans) set(lo, hi uint64, foreign bool) {
	if lo >= hi {
		return
	}
	out := (*ss)[:0:0]
	for _, x := range *ss {
		switch {
		case x.hi < lo || x.lo > hi:
			out = append(out, x)
		case foreign:
			lo, hi = min(lo, x.lo), max(hi, x.hi)
		default:
			if x.lo < lo {
				out = append(out, span{x.lo, lo})
			}
			if x.hi > hi {
				out = append(out, span{hi, x.hi})
			}
		}
	}
	if foreign {
		out = append(out, span{lo, hi})
	}
	sortSpans(out)
	*ss = out
}

// overlap is how many bytes of [lo, hi) are marked.
func (ss spans) overlap(lo, hi uint64) uint64 {
	var n uint64
	for _, x := range ss {
		if a, b := max(lo, x.lo), min(hi, x.hi); a < b {
			n += b - a
		}
	}
	return n
}

func sortSpans(ss []span) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j].lo < ss[j-1].lo; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}

// moved is the extra time of rank r's put o for the bytes it reads that
// another rank wrote, and marks what o writes in its peer's window
// (nothing when the model has no Moved cost).
func (s *sim) moved(r int, o plan.Op) float64 {
	if !s.trackMoved {
		return 0
	}
	var extra float64
	if o.Buf == 0 {
		rk := &s.ranks[r]
		if n := rk.foreign.overlap(o.BufOff, o.BufOff+o.N); n > 0 {
			a, l := s.tab[transport.KindSelf].Moved.Of(n)
			extra = a + l
			rk.foreign.set(o.BufOff, o.BufOff+o.N, false)
		}
	}
	s.ranks[o.Peer].foreign.set(o.Off, o.Off+o.N, o.Peer != r)
	return extra
}

// filled makes rank r's window its own again where a fill of buffer buf
// wrote it.
func (s *sim) filled(r, buf int) {
	if s.trackMoved && buf == 0 {
		rk := &s.ranks[r]
		rk.foreign.set(0, rk.shape.Buffers[0], false)
	}
}
