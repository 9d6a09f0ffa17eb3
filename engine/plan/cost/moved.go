package cost

import (
	"slices"
	"sort"

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

// set marks [lo, hi) as written by another rank (foreign) or not. The
// ranges it changes are found by binary search and replaced in place: a
// thousand ranks' chunks arriving in any order cost a search each.
func (ss *spans) set(lo, hi uint64, foreign bool) {
	if lo >= hi {
		return
	}
	s := *ss
	// s[i:j] are the ranges that overlap or touch [lo, hi].
	i := sort.Search(len(s), func(k int) bool { return s[k].hi >= lo })
	j := i + sort.Search(len(s)-i, func(k int) bool { return s[i+k].lo > hi })
	var repl [2]span
	n := 0
	switch {
	case foreign && i < j:
		repl[0], n = span{min(lo, s[i].lo), max(hi, s[j-1].hi)}, 1
	case foreign:
		repl[0], n = span{lo, hi}, 1
	case i < j:
		if s[i].lo < lo {
			repl[n], n = span{s[i].lo, lo}, n+1
		}
		if s[j-1].hi > hi {
			repl[n], n = span{hi, s[j-1].hi}, n+1
		}
	}
	*ss = slices.Replace(s, i, j, repl[:n]...)
}

// overlap is how many bytes of [lo, hi) are marked.
func (ss spans) overlap(lo, hi uint64) uint64 {
	var n uint64
	for k := sort.Search(len(ss), func(k int) bool { return ss[k].hi > lo }); k < len(ss) && ss[k].lo < hi; k++ {
		if a, b := max(lo, ss[k].lo), min(hi, ss[k].hi); a < b {
			n += b - a
		}
	}
	return n
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
