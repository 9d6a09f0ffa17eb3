package verify

import (
	"fmt"

	"github.com/luacoll/luacoll/engine/plan"
)

// accRef is an entry of a memory's access list: the access's lo, which
// the list's searches read without going to the access, and its slot in
// the sim's pool. The lists hold no pointers, so inserting into the
// middle of one moves plain words: no write barriers while the collector
// runs, and no scanning of the lists.
type accRef struct {
	lo uint64
	n  uint32 // hi - lo, or wideRef where that does not fit
	id uint32
}

// wideRef is accRef.n of an access too long for it: its hi is read from
// the access.
const wideRef = ^uint32(0)

// accPool holds the accesses of the memories' lists, each in one slot
// while one list refers to it; a slot a list dropped is used again.
type accPool struct {
	all  []*access
	free []uint32
}

// put gives a a slot and returns the reference to it.
func (p *accPool) put(a *access) accRef {
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		p.all[id] = a
		return accRef{lo: a.lo, n: refLen(a), id: id}
	}
	p.all = append(p.all, a)
	return accRef{lo: a.lo, n: refLen(a), id: uint32(len(p.all) - 1)}
}

func refLen(a *access) uint32 { return uint32(min(a.hi-a.lo, uint64(wideRef))) }

// hi is the end of r's access.
func (p *accPool) hi(r accRef) uint64 {
	if r.n == wideRef {
		return p.all[r.id].hi
	}
	return r.lo + uint64(r.n)
}

func (p *accPool) get(r accRef) *access { return p.all[r.id] }

// drop frees r's slot: no list refers to it any more.
func (p *accPool) drop(r accRef) {
	p.all[r.id] = nil
	p.free = append(p.free, r.id)
}

// touch checks a new access a to memory m of rank owner, made by a rank
// whose vector clock is vc, against the accesses m remembers, and adds it.
// Accesses that a covers and that are ordered before it are forgotten
// (a read keeps a write it forgets as its under): any later access
// ordered after a is ordered after them too.
func (s *sim) touch(owner int, vc []uint32, m *memory, a *access) {
	if a.lo >= a.hi {
		return
	}
	wide := m.isWide(a)
	k := s.check(owner, vc, m, a, m.wide, 0, len(m.wide))
	m.wide = m.wide[:k]
	if wide {
		m.wide = append(m.wide, s.pool.put(a))
	} else {
		m.maxLen = max(m.maxLen, a.hi-a.lo)
	}
	var from uint64
	if a.lo > m.maxLen {
		from = a.lo - m.maxLen
	}
	// Only narrow accesses starting in [from, a.hi) can overlap a.
	i := searchLo(m.acc, from)
	j := i + searchLo(m.acc[i:], a.hi)
	keep := s.check(owner, vc, m, a, m.acc, i, j)
	if wide {
		// Close the gap check left at [keep, j).
		n := copy(m.acc[keep:], m.acc[j:])
		m.acc = m.acc[:keep+n]
		return
	}
	m.insert(s.pool.put(a), i, keep, j)
}

// searchLo is the first entry of list (sorted by lo) whose lo is at least
// lo, or len(list).
func searchLo(list []accRef, lo uint64) int {
	i, j := 0, len(list)
	for i < j {
		h := int(uint(i+j) >> 1)
		if list[h].lo < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

// isWide says whether a is one of the few long accesses (a replay's
// result read, a fill) that touch checks every access against: a tenth of
// the memory or more.
func (m *memory) isWide(a *access) bool { return a.hi-a.lo >= max(m.size/10, 1) }

// check checks a against the accesses list[i:j] of m, reporting races,
// and drops those a covers and follows (any later access ordered after a
// is ordered after them too), freeing their slots. A read that drops a
// write keeps it as its under: a later read ordered after neither races
// the write, not the read. It moves what it keeps to list[i:keep] and
// returns keep; list[j:] stays where it is.
func (s *sim) check(owner int, vc []uint32, m *memory, a *access, list []accRef, i, j int) int {
	// The script's accesses between replays follow a sync, which
	// completes all its rank's own operations; they forget nothing, as
	// a replay run back to back has no sync.
	script := a.by.what != ""
	keep := i
	for k := i; k < j; k++ {
		r := list[k]
		if r.lo >= a.hi || s.pool.hi(r) <= a.lo {
			list[keep] = r
			keep++
			continue
		}
		y := s.pool.get(r)
		if w := y.under; w != nil && !a.write && w.lo < a.hi && a.lo < w.hi && !(script && w.by.rank == a.by.rank) {
			if u := w.unorderedFor(vc, a.by.rank); u != nil {
				s.race(owner, m, a, u)
			}
		}
		if y.by.rank == a.by.rank && y.pc == a.pc {
			list[keep] = r
			keep++
			continue
		}
		if sameRead(a, y) && (!a.by.kind.HasSignal() || a.covers == nil) && a.takeUnder(y.under) {
			// a stands for y. A put_signal's read is also ordered by its
			// signal, which orders nothing of y: it keeps y beside it.
			if a.by.kind.HasSignal() {
				a.covers = y
			}
			s.pool.drop(r)
			continue
		}
		u := y.unorderedFor(vc, a.by.rank)
		ordered := u == nil || (script && y.by.rank == a.by.rank)
		if !ordered && (a.write || y.write) {
			s.race(owner, m, a, u)
		}
		if ordered && !script && y.lo >= a.lo && y.hi <= a.hi && a.forgets(y) {
			s.pool.drop(r)
			continue
		}
		list[keep] = r
		keep++
	}
	return keep
}

// forgets reports whether a, ordered after y and covering it, can stand
// for y in its memory's list: a write for anything; a read for a read,
// and for a write (or a read's under) as its under when it holds no
// other.
func (a *access) forgets(y *access) bool {
	switch {
	case a.write:
		return true
	case y.write:
		return a.takeUnder(y)
	}
	return a.takeUnder(y.under)
}

// takeUnder makes w (nil: none) a's under where a has none or the same,
// and reports whether it did.
func (a *access) takeUnder(w *access) bool {
	if w == nil || a.under == w {
		return true
	}
	if a.under != nil {
		return false
	}
	a.under = w
	return true
}

// insert puts r into m.acc, whose [i, keep) are what touch kept of the
// accesses [i, j) it looked at, after the kept ones starting at or
// before r's access.
func (m *memory) insert(r accRef, i, keep, j int) {
	p := i + searchLo(m.acc[i:keep], r.lo+1)
	if keep == j {
		m.acc = append(m.acc, accRef{})
		copy(m.acc[p+1:], m.acc[p:])
		m.acc[p] = r
		return
	}
	old := len(m.acc)
	copy(m.acc[p+1:keep+1], m.acc[p:keep])
	m.acc[p] = r
	n := copy(m.acc[keep+1:], m.acc[j:old])
	m.acc = m.acc[:keep+1+n]
}

// orderedFor reports whether rank who, whose vector clock is vc, is
// ordered after access y: it has reached the clock at which y is known complete,
// or at which the peer of y's put_signal saw its signal; and so after
// every read y stands for (covers).
func (y *access) orderedFor(vc []uint32, who int) bool { return y.unorderedFor(vc, who) == nil }

// unorderedFor returns the first of y and the reads it stands for that
// rank who, whose vector clock is vc, is not ordered after, or nil.
func (y *access) unorderedFor(vc []uint32, who int) *access {
	for x := y; x != nil; x = x.covers {
		if !(x.done != 0 && vc[x.by.rank] >= x.done && !(x.fenced && who == x.by.rank)) && !(x.seenAt != 0 && vc[x.seenBy] >= x.seenAt) {
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

// xferRec is a transfer with its two accesses: one allocation for the
// three (the accesses stay as long as the lists or the xfer hold any).
type xferRec struct {
	x        xfer
	src, dst access
}

// transfer starts a copy of n bytes from (from, fbuf, foff) to (to, tbuf,
// toff) issued by rank r: its source read and destination write, checked
// against earlier accesses, and its labels.
func (s *sim) transfer(r int, st *rankState, ref *opRef, from, fbuf int, foff uint64, to, tbuf int, toff, n uint64, local bool) *xfer {
	t := &xferRec{src: access{by: ref, pc: st.pc, source: true, lo: foff, hi: foff + n},
		dst: access{by: ref, pc: st.pc, write: true, lo: toff, hi: toff + n}}
	src, dst := &t.src, &t.dst
	sm, dm := s.mem[from][fbuf], s.mem[to][tbuf]
	s.touch(from, st.vc, sm, src)
	s.labs = sm.getInto(s.labs[:0], foff, foff+n)
	s.touch(to, st.vc, dm, dst)
	dm.put(toff, s.labs, ref)
	x := &t.x
	*x = xfer{src: src, dst: dst, local: local}
	st.local = append(st.local, x)
	return x
}
