package verify

import (
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
)

// The ends of replays and calls: where a script may read a rank's result
// and rewrite its sources, the collective's result checked there, and the
// races of those reads and rewrites with the stream.

// replayEnd is the point after rank r's replay rep (0-based) where a
// script may sync, read its result and rewrite its sources: the result
// must be in r's window, and the source gets the next replay's contents.
// The stream itself goes on without a sync (p:run{times = N}), so the
// script's accesses see r's own operations complete and change nothing
// the stream knows.
//
// With Options.CallEnds the same happens at the end of every call a list
// holds: rep is then the call's number in the run (0-based), list the
// list's replay.
func (s *sim) replayEnd(r int, st *rankState, rep, list int) {
	c := s.tick(st, r)
	if !s.collOK || s.coll.N == 0 {
		return
	}
	end := &replayEnd{rank: r, rep: rep, list: list, waits: append([]int(nil), st.waits...)}
	lo, hi := s.resultRange(r)
	if lo < hi {
		ref := &opRef{rank: r, rep: list + 1, what: fmt.Sprintf("rank %d's result at the end of %s %d", r, s.unit(), rep+1)}
		s.touch(r, st.vc, s.mem[r][plan.WindowBuf], &access{by: ref, pc: -1 - rep, lo: lo, hi: hi, done: c, end: end})
	}
	switch {
	case rep+1 >= s.total:
	case s.coll.Src != nil || isReduceColl(s.coll.Kind):
		// The expected bytes are known now: the declared sources, or
		// (reductions) every rank's contribution once.
		s.at, s.want = end, rep+1
		s.checkRank(r)
		s.at, s.want = nil, s.total
	default:
		s.snapEnd(r, rep, end)
	}
	if rep+1 < s.total {
		s.versionSource(r, st, rep+1, c)
	}
}

// endSnaps are, per replay (or call) before the last, the result ranges
// the ranks held at their ends of it, kept until every rank got there:
// without sources, the ranks' results are compared with each other, each
// as it was at its own end of that replay (a rank further behind would
// otherwise stand for the expected bytes before it holds them).
type endSnaps struct {
	mems []*memory
	ends []*replayEnd
	n    int
}

// snapEnd keeps rank r's result range at its end of replay rep and, once
// every rank's is kept, checks them against each other.
func (s *sim) snapEnd(r, rep int, end *replayEnd) {
	if s.endSnaps == nil {
		s.endSnaps = map[int]*endSnaps{}
	}
	es := s.endSnaps[rep]
	if es == nil {
		es = &endSnaps{mems: make([]*memory, s.n), ends: make([]*replayEnd, s.n)}
		s.endSnaps[rep] = es
	}
	win := s.mem[r][plan.WindowBuf]
	lo, hi := s.resultRange(r)
	segs := win.get(lo, hi)
	m := &memory{size: win.size}
	if len(segs) > 0 {
		m.chunks, m.ends = [][]seg{segs}, []uint64{segs[len(segs)-1].hi}
	}
	es.mems[r], es.ends[r] = m, end
	if es.n++; es.n < s.n {
		return
	}
	delete(s.endSnaps, rep)
	live := make([]*memory, s.n)
	for q := range s.n {
		live[q], s.mem[q][plan.WindowBuf] = s.mem[q][plan.WindowBuf], es.mems[q]
	}
	s.want = rep + 1
	for q := range s.n {
		s.at = es.ends[q]
		s.checkRank(q)
	}
	s.at, s.want = nil, s.total
	for q := range s.n {
		s.mem[q][plan.WindowBuf] = live[q]
	}
}

// callEnd reports whether position pc of a rank's run (ops done, list of
// n ops) ends a call, and which (0-based, over the run).
func (s *sim) callEnd(r, pc, n int) (int, bool) {
	rep, at := pc/n, pc%n
	if at == 0 {
		return rep*s.calls - 1, true
	}
	if s.ends != nil {
		for j, e := range s.ends[r] {
			if e == at {
				return rep*s.calls + j, true
			}
		}
	}
	return 0, false
}

// unit names what a result check follows: a replay, or a call when a list
// holds several.
func (s *sim) unit() string {
	if s.calls > 1 {
		return "call"
	}
	return "replay"
}

// replayEnd says which rank's replay (or call) end is being checked, and
// in which replay of its list.
type replayEnd struct {
	rank, rep, list int
	waits           []int
}

// resultRange is the part of rank r's window the collective defines.
func (s *sim) resultRange(r int) (uint64, uint64) {
	c := s.coll
	switch c.Kind {
	case "allgather", "alltoall":
		return 0, c.N * uint64(s.n)
	case "broadcast":
		if r != c.Root || (c.Src != nil && c.Src[c.Root].Buf == plan.WindowBuf) {
			return 0, c.N
		}
	case "reduce_scatter", "allreduce":
		return s.reduceRange(r)
	}
	return 0, 0
}

// checkRank compares rank q's window with the collective's result.
func (s *sim) checkRank(q int) {
	c, n, N := s.coll, s.n, s.coll.N
	switch c.Kind {
	case "allgather":
		for r := 0; r < n; r++ {
			if want, ok := s.expect(r, 0, r); ok {
				s.compare(q, uint64(r)*N, want, func() string { return fmt.Sprintf("rank %d's chunk", r) })
			}
		}
	case "alltoall":
		for r := 0; r < n; r++ {
			if want, ok := s.expectAt(r, uint64(q)*N, q, r); ok {
				s.compare(q, uint64(r)*N, want, func() string { return fmt.Sprintf("rank %d's chunk %d", r, q) })
			}
		}
	case "broadcast":
		if want, ok := s.expect(c.Root, 0, (c.Root+1)%n); ok && (q != c.Root || (c.Src != nil && c.Src[c.Root].Buf == plan.WindowBuf)) {
			s.compare(q, 0, want, func() string { return fmt.Sprintf("rank %d's message", c.Root) })
		}
	case "reduce_scatter", "allreduce":
		s.checkReduced(q)
	}
}

// versionSources labels every declared source with replay rep+1's
// contents (before the first replay).
func (s *sim) versionSources(rep int) {
	if !s.collOK || s.coll.Src == nil {
		return
	}
	for r, src := range s.coll.Src {
		if src.Buf >= 0 {
			lo, hi := s.sourceRange(r)
			s.mem[r][src.Buf].relabel(lo, hi, label{org: r, buf: src.Buf, off: lo, ver: rep + 1})
		}
	}
}

func (s *sim) sourceRange(r int) (uint64, uint64) {
	src, span := s.coll.Src[r], s.coll.N
	if s.coll.Kind == "alltoall" || s.coll.Kind == "reduce_scatter" {
		span *= uint64(s.n)
	}
	return src.Off, src.Off + span
}

// versionSource is rank r's script rewriting its source for replay rep
// (0-based): a write, then the new contents.
func (s *sim) versionSource(r int, st *rankState, rep int, c uint32) {
	if s.coll.Src == nil || s.coll.Src[r].Buf < 0 {
		return
	}
	src := s.coll.Src[r]
	lo, hi := s.sourceRange(r)
	ref := &opRef{rank: r, rep: rep + 1, what: fmt.Sprintf("rank %d's script rewriting its source for replay %d", r, rep+1)}
	m := s.mem[r][src.Buf]
	s.touch(r, st.vc, m, &access{by: ref, pc: -1000 - rep, write: true, lo: lo, hi: hi, done: c})
	m.relabel(lo, hi, label{org: r, buf: src.Buf, off: lo, ver: rep + 1})
}

// letThrough is the wait of rank r's replay (end.waits) that should have
// kept out what arrived from rank q: its last wait on a row of q's, else
// its last wait; -1 if it passed none.
func (s *sim) letThrough(end *replayEnd, q int) int {
	ops := s.lists[end.rank].Ops
	for j := len(end.waits) - 1; j >= 0; j-- {
		o := ops[end.waits[j]]
		if o.Kind == plan.WaitSignal || o.Peer == q {
			return end.waits[j]
		}
	}
	if len(end.waits) > 0 {
		return end.waits[len(end.waits)-1]
	}
	return -1
}

// resultProblem is a wrong result at the end of a replay, blamed on the
// wait that let it through.
func (s *sim) resultProblem(end *replayEnd, q int, msg string) {
	p := Problem{Kind: "result", Rank: end.rank, Replay: end.rep + 1}
	if i := s.letThrough(end, q); i >= 0 {
		o := s.lists[end.rank].Ops[i]
		p.Op, p.OpName, p.Site = i+1, o.Kind.String(), o.Site
		msg += fmt.Sprintf("; the wait that let it through: op %d (%s at %s)", i+1, o.Kind, o.Site)
	} else {
		msg += "; no wait of this replay orders it"
	}
	p.Msg = msg
	s.add(p)
}

// staleResult reports bytes of rank q's window that hold other than the
// result at the end of one of its replays.
func (s *sim) staleResult(q int, lo, hi uint64, found label, want string) {
	key := [4]int{-2, q, s.at.rep, int(lo / max(s.coll.N, 1))}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	from := -1
	if found.by != nil {
		from = found.by.rank
	}
	if w := strings.Index(want, "rank "); w >= 0 {
		var p int
		if _, err := fmt.Sscanf(want[w:], "rank %d", &p); err == nil && from < 0 {
			from = p
		}
	}
	msg := fmt.Sprintf("%s: at the end of %s %d, rank %d's window bytes [%d, %d) (chunk %d) hold %s, expected %s",
		s.coll.Kind, s.unit(), s.at.rep+1, q, lo, hi, lo/max(s.coll.N, 1), found, want)
	if found.by != nil {
		msg += fmt.Sprintf(" (written by %s)", found.by)
	}
	s.resultProblem(s.at, from, msg)
}

// endRace reports a write into rank a's result that is not ordered with
// the end of a replay (y is the end's read, x the write).
func (s *sim) endRace(y, x *access) {
	end := y.end
	key := [4]int{-3, end.rank, x.by.rank, x.by.op*64 + end.rep}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	lo, hi := max(x.lo, y.lo), min(x.hi, y.hi)
	when := "may still be arriving"
	if x.by.rep > end.list+1 {
		when = "of a later replay may already have landed"
	}
	s.resultProblem(end, x.by.rank, fmt.Sprintf("%s: at the end of %s %d, rank %d's window bytes [%d, %d) (chunk %d): %s's data %s (nothing orders it with the end of the %s)",
		s.coll.Kind, s.unit(), end.rep+1, end.rank, lo, hi, lo/max(s.coll.N, 1), x.by, when, s.unit()))
}
