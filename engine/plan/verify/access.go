package verify

import (
	"fmt"

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
	// The script's accesses between replays follow a sync, which
	// completes all its rank's own operations; they forget nothing, as
	// a replay run back to back has no sync.
	script := a.by.what != ""
	keep := m.acc[:0]
	for _, y := range m.acc {
		if y.hi <= a.lo || y.lo >= a.hi || (y.by.rank == a.by.rank && y.pc == a.pc) {
			keep = append(keep, y)
			continue
		}
		ordered := y.orderedFor(vc) || (script && y.by.rank == a.by.rank)
		if !ordered && (a.write || y.write) {
			s.race(owner, m, a, y)
		}
		if ordered && !script && y.lo >= a.lo && y.hi <= a.hi {
			continue
		}
		keep = append(keep, y)
	}
	m.acc = append(keep, a)
}

// orderedFor reports whether a rank whose vector clock is vc is ordered
// after access y: it has reached the clock at which y is known complete,
// or at which the peer of y's put_signal saw its signal.
func (y *access) orderedFor(vc []uint32) bool {
	return (y.done != 0 && vc[y.by.rank] >= y.done) || (y.seenAt != 0 && vc[y.seenBy] >= y.seenAt)
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
