package verify

import (
	"fmt"

	"github.com/luacoll/luacoll/engine/plan"
)

// checkResult checks, after the last replay, that every put into a rank's
// window is known to that rank to have arrived, and that the windows hold
// what the declared collective must leave there.
func (s *sim) checkResult() {
	c := s.coll
	if !s.collOK {
		return
	}
	s.checkArrived()
	if c.N == 0 {
		return
	}
	n, N := s.n, c.N
	switch c.Kind {
	case "allgather":
		for r := 0; r < n; r++ {
			want, ok := s.expect(r, 0, r)
			for q := 0; q < n && ok; q++ {
				s.compare(q, uint64(r)*N, want, func() string { return fmt.Sprintf("rank %d's chunk", r) })
			}
		}
	case "alltoall":
		for r := 0; r < n; r++ {
			for q := 0; q < n; q++ {
				want, ok := s.expectAt(r, uint64(q)*N, q, r)
				if ok {
					s.compare(q, uint64(r)*N, want, func() string { return fmt.Sprintf("rank %d's chunk %d", r, q) })
				}
			}
		}
	case "reduce_scatter", "allreduce":
		for q := 0; q < n; q++ {
			s.checkReduced(q)
		}
	case "broadcast":
		ref := (c.Root + 1) % n
		want, ok := s.expect(c.Root, 0, ref)
		for q := 0; q < n && ok; q++ {
			if q != c.Root || (c.Src != nil && c.Src[c.Root].Buf == plan.WindowBuf) {
				s.compare(q, 0, want, func() string { return fmt.Sprintf("rank %d's message", c.Root) })
			}
		}
	}
}

// checkCollective validates the declared collective against the shapes.
func (s *sim) checkCollective() bool {
	c, n := s.coll, s.n
	bad := func(rank int, format string, a ...any) bool {
		s.add(Problem{Kind: "postcondition", Rank: rank, Msg: fmt.Sprintf(format, a...)})
		return false
	}
	var need uint64
	switch c.Kind {
	case "allgather", "alltoall":
		need = c.N * uint64(n)
		if c.N != 0 && need/c.N != uint64(n) {
			return bad(0, "%s of %d bytes per rank overflows", c.Kind, c.N)
		}
	case "reduce_scatter":
		need = c.N * uint64(n)
		if c.N != 0 && need/c.N != uint64(n) {
			return bad(0, "%s of %d bytes per rank overflows", c.Kind, c.N)
		}
	case "allreduce":
		need = c.N
	case "broadcast":
		need = c.N
		if c.Root < 0 || c.Root >= n {
			return bad(0, "broadcast root %d is outside 0..%d", c.Root, n-1)
		}
	default:
		return bad(0, "unknown collective %q (want allgather, alltoall, broadcast, reduce_scatter or allreduce)", c.Kind)
	}
	if need > s.sh.Bytes {
		return bad(0, "%s of n=%d needs %d bytes of window; it has %d", c.Kind, c.N, need, s.sh.Bytes)
	}
	if c.Src != nil {
		if len(c.Src) != n {
			return bad(0, "%d sources for %d ranks", len(c.Src), n)
		}
		span := c.N
		if c.Kind == "alltoall" || c.Kind == "reduce_scatter" {
			span = need
		}
		for r, src := range c.Src {
			if isReduceColl(c.Kind) && src.Buf != plan.WindowBuf {
				return bad(r, "%s is in place: its source must be the window", c.Kind)
			}
			if src.Buf < 0 {
				continue
			}
			bufs := s.lists[r].Shape.Buffers
			if src.Buf >= len(bufs) {
				return bad(r, "source buffer %d is not one of the plan's", src.Buf)
			}
			if err := plan.RangeErr("src_off", "n", src.Off, span, bufs[src.Buf], bufWhat(src.Buf, r)); err != nil {
				return bad(r, "source: %v", err)
			}
		}
	}
	return true
}

// expect returns what every rank must hold of rank r's contribution of
// N bytes: its source's labels when the source is known (a window source
// is in place: the bytes it held before the plan), else what rank ref
// ended with, which must come from rank r.
func (s *sim) expect(r int, off uint64, ref int) ([]seg, bool) {
	return s.expectAt(r, off, ref, r)
}

// expectAt is expect for the N bytes at off within rank r's source
// (alltoall: its chunk for rank q); without a source it takes what rank
// ref holds at r*N (allgather, alltoall) or 0 (broadcast), moved by off.
func (s *sim) expectAt(r int, off uint64, ref, slot int) ([]seg, bool) {
	c := s.coll
	N := c.N
	if c.Src != nil && c.Src[r].Buf >= 0 {
		src := c.Src[r]
		if src.Buf == plan.WindowBuf {
			s.wantSegs = append(s.wantSegs[:0], seg{lo: 0, hi: N, lab: label{org: r, buf: plan.WindowBuf, off: src.Off + off, ver: s.want}})
			return s.wantSegs, true
		}
		segs := s.wanted(s.mem[r][src.Buf], src.Off+off, N)
		for i := range segs {
			if segs[i].lab.ver > 0 {
				segs[i].lab.ver = s.want
			}
		}
		return segs, true
	}
	at := uint64(slot) * N
	if c.Kind == "broadcast" {
		at = 0
	}
	if c.Kind == "alltoall" {
		// What rank 0 got from r, moved to chunk ref: r's chunks are
		// consecutive in one source.
		got := s.wanted(s.mem[0][plan.WindowBuf], uint64(r)*N, N)
		for i := range got {
			if got[i].lab.buf >= 0 || got[i].lab.fill != nil {
				got[i].lab.off += off
			}
		}
		return got, s.fromRank(0, uint64(r)*N, r, got)
	}
	got := s.wanted(s.mem[ref][plan.WindowBuf], at, N)
	return got, s.fromRank(ref, at, r, got)
}

// fromRank reports (and returns false) bytes that rank q holds at off
// which did not come from rank r.
func (s *sim) fromRank(q int, off uint64, r int, segs []seg) bool {
	for _, g := range segs {
		if g.lab.org != r {
			s.mismatch(q, off+g.lo, off+g.hi, g.lab, fmt.Sprintf("bytes from rank %d", r))
			return false
		}
	}
	return true
}

// wanted is the labels of m's n bytes at off, based at 0, in the
// result checks' copy of what a rank must hold (s.wantSegs).
func (s *sim) wanted(m *memory, off, n uint64) []seg {
	s.wantSegs = m.getInto(s.wantSegs[:0], off, off+n)
	return rebase(s.wantSegs)
}

// rebase moves segments to start at 0.
func rebase(segs []seg) []seg {
	if len(segs) == 0 {
		return nil
	}
	base := segs[0].lo
	for i := range segs {
		segs[i].lo -= base
		segs[i].hi -= base
	}
	return segs
}

// compare checks that rank q's window holds want (based at 0) at off, and
// reports every segment that does not; what names the bytes in a report
// (called only for one).
func (s *sim) compare(q int, off uint64, want []seg, what func() string) {
	if len(want) == 0 {
		return
	}
	s.gotSegs = s.mem[q][plan.WindowBuf].getInto(s.gotSegs[:0], off, off+want[len(want)-1].hi)
	got := rebase(s.gotSegs)
	i, j := 0, 0
	for i < len(got) && j < len(want) {
		g, w := got[i], want[j]
		if !sameData(g.lab, w.lab, g.lo, w.lo) {
			lo := max(g.lo, w.lo)
			found, exp := g.lab, w.lab
			found.off += lo - g.lo
			exp.off += lo - w.lo
			s.mismatch(q, off+lo, off+min(g.hi, w.hi), found, what()+": "+exp.String())
		}
		if g.hi <= w.hi {
			i++
		}
		if w.hi <= g.hi {
			j++
		}
	}
}

// sameData reports whether the segments g (at glo) and w (at wlo) name
// the same origin bytes position by position.
func sameData(g, w label, glo, wlo uint64) bool {
	return g.org == w.org && g.buf == w.buf && g.fill == w.fill && g.ver == w.ver && g.off-glo == w.off-wlo
}

func (s *sim) mismatch(q int, lo, hi uint64, found label, want string) {
	if s.at != nil {
		s.staleResult(q, lo, hi, found, want)
		return
	}
	p := Problem{Kind: "postcondition", Rank: q,
		Msg: fmt.Sprintf("%s: rank %d's window bytes [%d, %d) hold %s, expected %s", s.coll.Kind, q, lo, hi, found, want)}
	if found.by != nil {
		p.Rank, p.Op, p.OpName, p.Replay, p.Site = found.by.rank, found.by.op, found.by.kind.String(), found.by.rep, found.by.site
		p.Msg += fmt.Sprintf(" (written by %s)", found.by)
	} else {
		p.Msg += " (never written by the plan)"
	}
	s.add(p)
}

// checkArrived reports puts into a rank's window that the rank is not
// known to have seen arrive when its plan ends (its own writes complete
// with the stream, which the caller syncs).
func (s *sim) checkArrived() {
	for b := range s.rk {
		vc := s.rk[b].vc
		seen := map[[2]int]bool{}
		m := s.mem[b][plan.WindowBuf]
		var all []*access
		for _, r := range append(append([]accRef(nil), m.wide...), m.acc...) {
			x := s.pool.get(r)
			all = append(all, x)
			if x.under != nil {
				all = append(all, x.under) // a write a read stands for
			}
		}
		for _, y := range all {
			a := y.by.rank
			if !y.write || a == b || y.orderedFor(vc, b) || seen[[2]int{a, y.by.op}] {
				continue
			}
			seen[[2]int{a, y.by.op}] = true
			s.add(Problem{Kind: "postcondition", Rank: a, Op: y.by.op, OpName: y.by.kind.String(), Replay: y.by.rep, Site: y.by.site,
				Msg: fmt.Sprintf("its data for rank %d's window bytes [%d, %d) is not known to have arrived when rank %d's plan ends: rank %d waits for no signal that orders it (a put_signal, or a fence then a signal)", b, y.lo, y.hi, b, b)})
		}
	}
}

func bufWhat(buf, rank int) string {
	if buf == plan.WindowBuf {
		return fmt.Sprintf("the window on rank %d", rank)
	}
	return fmt.Sprintf("buffer %s of rank %d", plan.BufName(buf), rank)
}
