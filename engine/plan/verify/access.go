package verify

import (
	"fmt"
	"sort"

	"github.com/luacoll/luacoll/engine/plan"
)

// touch checks a new access a to memory m of rank owner, made by a rank
// whose vector clock is vc, against the accesses m remembers, and adds it.
// Accesses that a covers and that are ordered before it are forgotten: any
// later access ordered after a is ordered after them too.
func (s *sim) touch(owner int, vc []uint32, m *memory, a *access) {
	if a.lo >= a.hi {
		return
	}
	wide := m.isWide(a)
	k := s.check(owner, vc, m, a, m.wide, 0, len(m.wide))
	clear(m.wide[k:])
	m.wide = m.wide[:k]
	if wide {
		m.wide = append(m.wide, a)
	} else {
		m.maxLen = max(m.maxLen, a.hi-a.lo)
	}
	var from uint64
	if a.lo > m.maxLen {
		from = a.lo - m.maxLen
	}
	// Only narrow accesses starting in [from, a.hi) can overlap a.
	i := sort.Search(len(m.acc), func(k int) bool { return m.acc[k].lo >= from })
	j := i + sort.Search(len(m.acc)-i, func(k int) bool { return m.acc[i+k].lo >= a.hi })
	keep := s.check(owner, vc, m, a, m.acc, i, j)
	if wide {
		// Close the gap check left at [keep, j).
		n := copy(m.acc[keep:], m.acc[j:])
		clear(m.acc[keep+n:])
		m.acc = m.acc[:keep+n]
		return
	}
	m.insert(a, i, keep, j)
}

// isWide says whether a is one of the few long accesses (a replay's
// result read, a fill) that touch checks every access against: a tenth of
// the memory or more.
func (m *memory) isWide(a *access) bool { return a.hi-a.lo >= max(m.size/10, 1) }

// check checks a against the accesses list[i:j] of m, reporting races,
// and drops those a covers and follows (any later access ordered after a
// is ordered after them too). It moves what it keeps to list[i:keep] and
// returns keep; list[j:] stays where it is.
func (s *sim) check(owner int, vc []uint32, m *memory, a *access, list []*access, i, j int) int {
	// The script's accesses between replays follow a sync, which
	// completes all its rank's own operations; they forget nothing, as
	// a replay run back to back has no sync.
	script := a.by.what != ""
	keep := i
	for k := i; k < j; k++ {
		y := list[k]
		if y.hi <= a.lo || y.lo >= a.hi || (y.by.rank == a.by.rank && y.pc == a.pc) {
			list[keep] = y
			keep++
			continue
		}
		if sameRead(a, y) && (!a.by.kind.HasSignal() || a.covers == nil) {
			// a stands for y. A put_signal's read is also ordered by its
			// signal, which orders nothing of y: it keeps y beside it.
			if a.by.kind.HasSignal() {
				a.covers = y
			}
			continue
		}
		u := y.unorderedFor(vc)
		ordered := u == nil || (script && y.by.rank == a.by.rank)
		if !ordered && (a.write || y.write) {
			s.race(owner, m, a, u)
		}
		if ordered && !script && y.lo >= a.lo && y.hi <= a.hi {
			continue
		}
		list[keep] = y
		keep++
	}
	return keep
}

// insert puts a into m.acc, whose [i, keep) are what touch kept of the
// accesses [i, j) it looked at, after the kept ones starting at or
// before a.
func (m *memory) insert(a *access, i, keep, j int) {
	p := i + sort.Search(keep-i, func(k int) bool { return m.acc[i+k].lo > a.lo })
	if keep == j {
		m.acc = append(m.acc, nil)
		copy(m.acc[p+1:], m.acc[p:])
		m.acc[p] = a
		return
	}
	old := len(m.acc)
	copy(m.acc[p+1:keep+1], m.acc[p:keep])
	m.acc[p] = a
	n := copy(m.acc[keep+1:], m.acc[j:old])
	clear(m.acc[keep+1+n : old])
	m.acc = m.acc[:keep+1+n]
}

// orderedFor reports whether a rank whose vector clock is vc is ordered
// after access y: it has reached the clock at which y is known complete,
// or at which the peer of y's put_signal saw its signal; and so after
// every read y stands for (covers).
func (y *access) orderedFor(vc []uint32) bool { return y.unorderedFor(vc) == nil }

// unorderedFor returns the first of y and the reads it stands for that a
// rank whose vector clock is vc is not ordered after, or nil.
func (y *access) unorderedFor(vc []uint32) *access {
	for x := y; x != nil; x = x.covers {
		if !(x.done != 0 && vc[x.by.rank] >= x.done) && !(x.seenAt != 0 && vc[x.seenBy] >= x.seenAt) {
			return x
		}
	}
	return nil
}

func (s *sim) race(owner int, m *memory, a, y *access) {
	switch {
	case y.end != nil:
		s.endRace(y, a)
		return
	case a.end != nil:
		s.endRace(a, y)
		return
	}
	key := [4]int{a.by.rank, a.by.op, y.by.rank, y.by.op}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	lo, hi := max(a.lo, y.lo), min(a.hi, y.hi)
	where := fmt.Sprintf("rank %d's window", owner)
	if m != s.mem[owner][plan.WindowBuf] {
		for b, mm := range s.mem[owner] {
			if mm == m {
				where = fmt.Sprintf("rank %d's buffer %s", owner, plan.BufName(b))
			}
		}
	}
	verb := func(x *access) string {
		switch {
		case x.write && x.by.kind == plan.Fill:
			return "fills"
		case x.write && isReduce(x.by.kind):
			return "reduces into"
		case x.write:
			return "writes"
		}
		return "reads"
	}
	var why string
	switch {
	case a.write && y.write:
		why = "two writes into one range that nothing orders (no signal, wait or barrier between them)"
	case a.write && y.source && y.by.rank == a.by.rank && a.by.rank == owner:
		why = "a source overwritten before its put completed locally (no flush, barrier or counter wait between)"
	case a.write && isReduce(y.by.kind) && !y.write:
		why = "a write into bytes a reduction reads in a step it is not ordered with"
	case a.write:
		why = "a write into bytes that are read as a put source in a step it is not ordered with"
	case isReduce(a.by.kind):
		why = "a reduction's source read while a write into it may still be arriving (wait for the signal that orders it)"
	default:
		why = "a put source read while a write into it may still be arriving (wait for the signal that orders it)"
	}
	s.add(Problem{Kind: "race", Rank: a.by.rank, Op: a.by.op, OpName: a.by.kind.String(), Replay: a.by.rep, Site: a.by.site,
		Msg: fmt.Sprintf("%s %s bytes [%d, %d) while %s %s them: %s",
			a.by, verb(a), lo, hi, y.by, verb(y), why) + "; in " + where,
		Other: y.by.ref()})
}

// sameRead reports whether y, a put's source read still in flight, is
// covered by a, a later one of the same rank: both complete with the
// rank's next flush or barrier (neither counts on a counter, whose wait
// completes its puts apart), so whatever races y races a, except where a
// rank is ordered after a put_signal's read by its signal, which says
// nothing of y's: such an a keeps y as covers (check). A rank that sends
// one source to a thousand peers would otherwise check each read against
// all those before it.
func sameRead(a, y *access) bool {
	return a.source && y.source && y.done == 0 && a.by.rank == y.by.rank && a.end == nil && y.end == nil &&
		a.by.what == "" && y.by.what == "" && !a.by.kind.HasCounter() && !y.by.kind.HasCounter() &&
		a.lo <= y.lo && y.hi <= a.hi
}
