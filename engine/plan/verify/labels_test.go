package verify

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// flatPut is put on one sorted list of segments, as memory kept them
// before they were cut into runs: the reference TestPutMatchesFlat holds
// the runs to.
func flatPut(segs []seg, dst uint64, src []seg, by *opRef) []seg {
	shift := func(x uint64) uint64 { return x - src[0].lo + dst }
	lo, hi := dst, shift(src[len(src)-1].hi)
	var out []seg
	for _, s := range segs {
		if s.hi <= lo || s.lo >= hi {
			out = append(out, s)
			continue
		}
		if s.lo < lo {
			l := s
			l.hi = lo
			out = append(out, l)
		}
		if s.lo < lo || s.lo == lo {
			for _, x := range src {
				x.lo, x.hi = shift(x.lo), shift(x.hi)
				x.lab.by = by
				out = append(out, x)
			}
		}
		if s.hi > hi {
			r := s
			r.lab.off += hi - r.lo
			r.lo = hi
			out = append(out, r)
		}
	}
	return out
}

// TestPutMatchesFlat puts random ranges of labels from one memory into
// another, thousands of times, and checks that the runs hold the same
// segments, in order, as one flat list does, and that get reads them back.
func TestPutMatchesFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const size = 1 << 16
	for trial := range 20 {
		m := newMemory(0, 0, size)
		src := newMemory(1, 0, size)
		flat := m.segs()
		for k := range 3000 {
			by := &opRef{rank: 0, op: k + 1}
			// Mostly short puts (a thousand ranks' parts), some long ones.
			n := uint64(rng.IntN(64) + 1)
			if rng.IntN(20) == 0 {
				n = uint64(rng.IntN(size/2) + 1)
			}
			from, to := rng.Uint64N(size-n+1), rng.Uint64N(size-n+1)
			if trial%2 == 0 {
				to = to / 64 * 64 // aligned parts, as an all-gather writes them
			}
			labs := src.get(from, from+n)
			flat = flatPut(flat, to, labs, by)
			m.put(to, labs, by)
			if k%7 == 0 {
				// Copy within the memory too, as a forwarding rank does.
				labs := m.get(to, to+n)
				src.put(from, labs, by)
			}
			if k%500 == 0 || k == 2999 {
				if got := m.segs(); !slices.Equal(got, flat) {
					t.Fatalf("trial %d, put %d: %d segments in runs, %d in the flat list; first runs %v", trial, k, len(got), len(flat), got[:min(4, len(got))])
				}
				for c, ch := range m.chunks {
					if len(ch) == 0 || len(ch) > 2*chunkMax {
						t.Fatalf("trial %d, put %d: a run of %d segments", trial, k, len(ch))
					}
					if m.ends[c] != ch[len(ch)-1].hi {
						t.Fatalf("trial %d, put %d: run %d ends at %d, its end says %d", trial, k, c, ch[len(ch)-1].hi, m.ends[c])
					}
				}
			}
		}
		lo, hi := uint64(1000), uint64(40000)
		var want []seg
		for _, s := range flat {
			if s.hi > lo && s.lo < hi {
				if s.lo < lo {
					s.lab.off += lo - s.lo
					s.lo = lo
				}
				s.hi = min(s.hi, hi)
				want = append(want, s)
			}
		}
		if got := m.get(lo, hi); !slices.Equal(got, want) {
			t.Fatalf("trial %d: get returned %d segments, want %d", trial, len(got), len(want))
		}
	}
}
