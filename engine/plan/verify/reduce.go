package verify

import (
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/engine/plan"
)

// Reductions (reduce, reduce_from) run in stream order: the reducing rank
// reads its source and reads and writes its destination when the op
// runs, so both accesses are complete at the op's own clock. A
// reduce_from's source is the peer's window: reading it races with any
// write into that range the reducing rank has not seen a signal (or
// barrier) order, like a put's source read.

// reduce adds the accesses of rank r's reduction o (ref, at clock c).
func (s *sim) reduce(r int, st *rankState, o *plan.Op, ref *opRef, c uint32) {
	from, buf, off := r, o.Src, o.SrcOff
	if o.Kind == plan.ReduceFrom {
		from, buf, off = o.Peer, plan.WindowBuf, o.Off
	}
	src := &access{by: ref, pc: st.pc, lo: off, hi: off + o.N, done: c}
	s.touch(from, st.vc, s.mem[from][buf], src)
	dm := s.mem[r][o.Buf]
	dst := &access{by: ref, pc: st.pc, write: true, lo: o.BufOff, hi: o.BufOff + o.N, done: c}
	s.touch(r, st.vc, dm, dst)
	s.reduceLabels(dm, o.BufOff, s.mem[from][buf].get(off, off+o.N), ref)
}

// isReduce reports whether k is a reduction.
func isReduce(k plan.Kind) bool { return k == plan.Reduce || k == plan.ReduceFrom }

// Symbolic reductions. The bytes a reduction writes carry a sum label: how
// many times each rank's input (its window before the plan, or a declared
// source's contents of one replay) at one origin offset went into them. A
// put copies the label, so a reduced chunk forwarded around a ring keeps
// its contributions; the reduce_scatter and allreduce checks then need
// every rank exactly once in every byte of the result.

// contrib is a sum label's contributions: cnt[r] copies of rank r's input,
// dup[r] the reduction that first added rank r a second time, and bad,
// when set, why the bytes are not a sum of inputs at all.
type contrib struct {
	cnt []int
	dup []*opRef
	bad string
}

// terms returns what label l (at relative position x of its segment)
// contributes to a reduction: counts per rank, the origin offset and
// replay, or why it is not a rank's input.
func (s *sim) terms(l label, x uint64) (cnt []int, dup []*opRef, origin uint64, bad string) {
	origin = l.off + x
	if l.sum != nil {
		return l.sum.cnt, l.sum.dup, origin, l.sum.bad
	}
	cnt, dup = make([]int, s.n), make([]*opRef, s.n)
	if l.buf != plan.WindowBuf && !(l.ver > 0 && s.coll.Src != nil && l.org >= 0 && l.org < s.n && s.coll.Src[l.org].Buf == l.buf) {
		return cnt, dup, origin, l.String() + " (not an input of the reduction)"
	}
	cnt[l.org] = 1
	return cnt, dup, origin, ""
}

// reduceLabels labels dst [lo, lo+n) of memory dm as dst op= src (the
// segments src, based anywhere), reduced by ref.
func (s *sim) reduceLabels(dm *memory, lo uint64, src []seg, ref *opRef) {
	src = rebase(src)
	dst := rebase(dm.get(lo, lo+srcLen(src)))
	var out []seg
	i, j := 0, 0
	for i < len(dst) && j < len(src) {
		d, g := dst[i], src[j]
		a, b := max(d.lo, g.lo), min(d.hi, g.hi)
		dc, dd, dor, dbad := s.terms(d.lab, a-d.lo)
		sc, sd, sor, sbad := s.terms(g.lab, a-g.lo)
		c := &contrib{cnt: make([]int, s.n), dup: append([]*opRef(nil), dd...), bad: dbad}
		for r := range c.cnt {
			c.cnt[r] = dc[r] + sc[r]
			if c.dup[r] == nil {
				c.dup[r] = sd[r]
			}
			if c.cnt[r] > 1 && c.dup[r] == nil {
				c.dup[r] = ref
			}
		}
		switch {
		case c.bad != "":
		case sbad != "":
			c.bad = sbad
		case dor != sor || d.lab.ver != g.lab.ver:
			c.bad = fmt.Sprintf("input bytes from offset %d reduced with those from offset %d", dor, sor)
		}
		lab := label{org: -1, buf: plan.WindowBuf, off: dor, ver: d.lab.ver, sum: c}
		out = append(out, seg{lo: a, hi: b, lab: lab})
		if d.hi <= b {
			i++
		}
		if g.hi <= b {
			j++
		}
	}
	dm.put(lo, out, ref)
}

func srcLen(segs []seg) uint64 {
	if len(segs) == 0 {
		return 0
	}
	return segs[len(segs)-1].hi - segs[0].lo
}

// reduceRange is the part of rank q's window that a reduce_scatter or
// allreduce defines, and the input offset it starts at.
func (s *sim) reduceRange(q int) (uint64, uint64) {
	off := s.coll.Src[q].Off
	if s.coll.Kind == "reduce_scatter" {
		off += uint64(q) * s.coll.N
	}
	return off, off + s.coll.N
}

// checkReduced checks that every byte of rank q's result is every rank's
// input at the same offset (of the last replay) exactly once (at least
// once for min and max).
func (s *sim) checkReduced(q int) {
	lo, hi := s.reduceRange(q)
	for _, g := range s.mem[q][plan.WindowBuf].get(lo, hi) {
		cnt, dup, origin, bad := s.terms(g.lab, 0)
		where := fmt.Sprintf("%s: rank %d's window bytes [%d, %d)", s.coll.Kind, q, g.lo, g.hi)
		switch {
		case bad != "":
			s.reduceProblem(q, -1, g.lab.by, where+" hold "+bad)
			continue
		case origin != g.lo:
			s.reduceProblem(q, -1, g.lab.by, fmt.Sprintf("%s hold a reduction of the inputs' bytes from offset %d, not %d", where, origin, g.lo))
			continue
		case g.lab.ver != 0 && g.lab.ver != s.want:
			s.reduceProblem(q, -1, g.lab.by, fmt.Sprintf("%s hold a reduction of the inputs of replay %d, not %d", where, g.lab.ver, s.want))
			continue
		}
		for r, k := range cnt {
			switch {
			case k == 0:
				s.reduceProblem(q, r, g.lab.by, fmt.Sprintf("%s lack rank %d's contribution", where, r))
			case k > 1 && !s.idem:
				s.reduceProblem(q, r, dup[r], fmt.Sprintf("%s hold rank %d's contribution %d times", where, r, k))
			}
		}
	}
}

// reduceProblem reports a wrong reduction result, blamed on by (the op
// that added a contribution twice, or that last wrote the bytes); at the
// end of a replay (or call) other than the last, as a result problem.
func (s *sim) reduceProblem(q, r int, by *opRef, msg string) {
	key := [4]int{-4, q, r, 0}
	if by != nil {
		key[3] = by.op*64 + by.rank
	}
	if s.at != nil {
		key[0], key[2] = -5-s.at.rep, r*s.n+q
	}
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	// A contribution missing or counted twice is the reduction's, not a
	// wait's: the problem names the op that last wrote the bytes.
	p := Problem{Kind: "postcondition", Rank: q, Msg: msg}
	if s.at != nil {
		p = Problem{Kind: "result", Rank: s.at.rank, Replay: s.at.rep + 1,
			Msg: fmt.Sprintf("at the end of %s %d, %s", s.unit(), s.at.rep+1, msg)}
	}
	if by != nil {
		p.Rank, p.Op, p.OpName, p.Site = by.rank, by.op, by.kind.String(), by.site
		if s.at == nil {
			p.Replay = by.rep // (a result problem's numbers the replay or call it ends)
		}
		p.Msg += fmt.Sprintf(" (by %s)", by)
	} else {
		p.Msg += " (never written by the plan)"
	}
	s.add(p)
}

// String describes the contributions of bytes from origin offset off.
func (c *contrib) String(off uint64) string {
	if c.bad != "" {
		return "a reduction of " + c.bad
	}
	var parts []string
	for r, k := range c.cnt {
		if k > 0 {
			parts = append(parts, fmt.Sprintf("rank %d x%d", r, k))
		}
	}
	return fmt.Sprintf("a reduction of the inputs from offset %d of %s", off, strings.Join(parts, ", "))
}

// isReduceColl reports whether kind is a collective that reduces.
func isReduceColl(kind string) bool { return kind == "reduce_scatter" || kind == "allreduce" }

// sameReduction reports whether every reduction of the lists computes the
// same element type and operation, as a reduce-scatter or all-reduce must
// (the result is one reduction of every rank's bytes); else it adds a
// problem naming the first that differs from the first of all. idem says
// that operation is min or max, which a contribution taken twice leaves
// the same.
func sameReduction(lists []plan.List, add func(Problem)) (same, idem bool) {
	var first *plan.Op
	firstRank := 0
	for r, l := range lists {
		for i := range l.Ops {
			o := &l.Ops[i]
			if o.Kind != plan.Reduce && o.Kind != plan.ReduceFrom {
				continue
			}
			if first == nil {
				first, firstRank = o, r
				continue
			}
			if o.DType != first.DType || o.RedOp != first.RedOp {
				add(Problem{Kind: "postcondition", Rank: r, Op: i + 1, OpName: o.Kind.String(), Site: o.Site,
					Msg: fmt.Sprintf("reduces %s with %s where rank %d's %s (%s) reduces %s with %s: a reduction of every rank's bytes takes one type and operation",
						o.DType, o.RedOp, firstRank, first.Kind, first.Site, first.DType, first.RedOp)})
				return false, false
			}
		}
	}
	return true, first != nil && (first.RedOp.Idempotent())
}
