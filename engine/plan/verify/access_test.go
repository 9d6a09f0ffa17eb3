package verify

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// The access lists' search finds the first entry at or past lo, as
// sort.Search over the entries' lo does, on lists with repeated values.
func TestSearchLo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 40; n++ {
		list := make([]accRef, n)
		for i := range list {
			list[i].lo = uint64(rng.IntN(20))
		}
		sort.Slice(list, func(i, j int) bool { return list[i].lo < list[j].lo })
		for lo := uint64(0); lo < 22; lo++ {
			want := sort.Search(n, func(i int) bool { return list[i].lo >= lo })
			if got := searchLo(list, lo); got != want {
				t.Fatalf("list of %d, lo %d: %d, want %d", n, lo, got, want)
			}
		}
	}
}

// A pool gives every live access its own slot, hands a dropped slot to
// the next access, and a reference reads back its access's end, long or
// short.
func TestAccPool(t *testing.T) {
	var p accPool
	a := &access{lo: 10, hi: 30}
	b := &access{lo: 5, hi: 5 + 1<<40} // too long for a reference's length
	ra, rb := p.put(a), p.put(b)
	if ra.id == rb.id || p.get(ra) != a || p.get(rb) != b {
		t.Fatalf("two accesses, slots %d and %d", ra.id, rb.id)
	}
	if p.hi(ra) != 30 || p.hi(rb) != b.hi || rb.n != wideRef {
		t.Fatalf("ends %d and %d (length field %d), want 30 and %d", p.hi(ra), p.hi(rb), rb.n, b.hi)
	}
	p.drop(ra)
	c := &access{lo: 1, hi: 2}
	rc := p.put(c)
	if rc.id != ra.id || p.get(rc) != c || p.get(rb) != b {
		t.Fatalf("after a drop: slot %d for the new access (the dropped one was %d)", rc.id, ra.id)
	}
	if len(p.all) != 2 || len(p.free) != 0 {
		t.Fatalf("pool of %d slots, %d free; want 2 and 0", len(p.all), len(p.free))
	}
}

// touch keeps a memory's list sorted by lo, with each entry's lo and end
// those of its access, as narrow accesses from many ranks arrive in any
// order.
func TestTouchKeepsListSorted(t *testing.T) {
	s := &sim{}
	m := newMemory(0, 0, 1<<20)
	vc := make([]uint32, 64)
	rng := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 500; k++ {
		lo := uint64(rng.IntN(1<<20 - 4096))
		a := &access{by: &opRef{rank: k % 64, op: k}, pc: k, lo: lo, hi: lo + 1 + uint64(rng.IntN(4096))}
		s.touch(0, vc, m, a)
		for i, r := range m.acc {
			y := s.pool.get(r)
			if y == nil || r.lo != y.lo || s.pool.hi(r) != y.hi {
				t.Fatalf("after %d accesses: entry %d does not match its access", k+1, i)
			}
			if i > 0 && m.acc[i-1].lo > r.lo {
				t.Fatalf("after %d accesses: entries %d and %d out of order", k+1, i-1, i)
			}
		}
	}
}
