package verify

import (
	"fmt"
	"sort"

	"github.com/luacoll/luacoll/engine/plan"
)

// Symbolic contents. Verify does not move bytes: every byte of every
// rank's window and buffers carries a label saying where its value came
// from (the rank, buffer and offset it held before the plan ran, or the
// fill that wrote it), and a put copies labels. A memory is a sorted list
// of segments covering it, each with the label of its first byte; the
// label of the byte at x is the segment's, offset by x - lo.

// label says where the bytes of a segment came from.
type label struct {
	org  int    // the rank whose memory (or fill) the bytes come from
	buf  int    // that rank's buffer (plan.WindowBuf: its window); -1 for a fill
	off  uint64 // origin offset of the segment's first byte
	fill *opRef // the fill that wrote them (buf == -1)
	by   *opRef // the op that last wrote them here (nil: never written)
	// ver is the replay (1-based) whose contents of a declared source the
	// bytes are: the script may rewrite its sources between replays. 0:
	// not a declared source.
	ver int
	// sum, when set, says the bytes are a reduction of inputs at origin
	// offset off (reduce.go); org is then -1.
	sum *contrib
}

func (a label) String() string {
	if a.sum != nil {
		return a.sum.String(a.off)
	}
	if a.buf < 0 {
		f := a.fill
		return fmt.Sprintf("bytes of rank %d's fill (op %d, %s) in replay %d from offset %d", f.rank, f.op, f.site, f.rep, a.off)
	}
	if a.ver > 0 {
		return fmt.Sprintf("rank %d's %s bytes from offset %d of replay %d", a.org, srcName(a.buf), a.off, a.ver)
	}
	if a.buf == plan.WindowBuf {
		return fmt.Sprintf("rank %d's window bytes from offset %d (as they were before the plan)", a.org, a.off)
	}
	return fmt.Sprintf("rank %d's buffer %s bytes from offset %d", a.org, plan.BufName(a.buf), a.off)
}

func srcName(buf int) string {
	if buf == plan.WindowBuf {
		return "window (source)"
	}
	return "source " + plan.BufName(buf)
}

type seg struct {
	lo, hi uint64
	lab    label
}

// memory is one buffer of one rank: its labels and the accesses to it
// that later accesses must be ordered with.
type memory struct {
	size uint64
	segs []seg
	// acc are the narrow accesses, sorted by lo; maxLen is the longest
	// it ever held, so that a new access only looks at those starting
	// within maxLen before it. wide are the long ones (isWide), which
	// every access looks at.
	acc, wide []*access
	maxLen    uint64
}

func newMemory(rank, buf int, size uint64) *memory {
	m := &memory{size: size}
	if size > 0 {
		m.segs = []seg{{lo: 0, hi: size, lab: label{org: rank, buf: buf}}}
	}
	return m
}

// split makes x a segment boundary (0 < x < size) and returns the index
// of the segment starting at x.
func (m *memory) split(x uint64) int {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].hi > x })
	if i == len(m.segs) {
		return i
	}
	s := m.segs[i]
	if s.lo == x {
		return i
	}
	left, right := s, s
	left.hi = x
	right.lo = x
	right.lab.off += x - s.lo
	m.segs = append(m.segs, seg{})
	copy(m.segs[i+2:], m.segs[i+1:])
	m.segs[i], m.segs[i+1] = left, right
	return i + 1
}

// get returns copies of the segments covering [lo, hi), cut to it.
func (m *memory) get(lo, hi uint64) []seg {
	if lo >= hi {
		return nil
	}
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].hi > lo })
	var out []seg
	for ; i < len(m.segs) && m.segs[i].lo < hi; i++ {
		s := m.segs[i]
		if s.lo < lo {
			s.lab.off += lo - s.lo
			s.lo = lo
		}
		s.hi = min(s.hi, hi)
		out = append(out, s)
	}
	return out
}

// put writes the segments src (as get returned them, starting at
// src[0].lo) at dst, marking them as written by by.
func (m *memory) put(dst uint64, src []seg, by *opRef) {
	if len(src) == 0 {
		return
	}
	shift := func(x uint64) uint64 { return x - src[0].lo + dst }
	lo, hi := dst, shift(src[len(src)-1].hi)
	i := m.split(lo)
	j := m.split(hi)
	// Replace segs[i:j] with src in place: at a thousand ranks a window
	// holds a thousand segments, and a copy of them a put was most of the
	// verifier's garbage.
	old, tail := len(m.segs), len(m.segs)-j
	size := i + len(src) + tail
	if size > cap(m.segs) {
		grown := make([]seg, size, size+size/4+4)
		copy(grown, m.segs[:i])
		copy(grown[i+len(src):], m.segs[j:])
		m.segs = grown
	} else {
		if i+len(src) != j {
			m.segs = m.segs[:max(size, old)]
			copy(m.segs[i+len(src):], m.segs[j:old])
			clear(m.segs[size:])
			m.segs = m.segs[:size]
		}
	}
	for k, s := range src {
		s.lo, s.hi = shift(s.lo), shift(s.hi)
		s.lab.by = by
		m.segs[i+k] = s
	}
}

// relabel gives [lo, hi) the label lab (its first byte's), as the script
// writes it between replays.
func (m *memory) relabel(lo, hi uint64, lab label) {
	if lo < hi && hi <= m.size {
		m.put(lo, []seg{{lo: 0, hi: hi - lo, lab: lab}}, nil)
	}
}

// fill labels [0, size) as written by the fill f.
func (m *memory) fill(f *opRef) {
	if m.size == 0 {
		return
	}
	m.segs = []seg{{lo: 0, hi: m.size, lab: label{org: f.rank, buf: -1, fill: f, by: f}}}
}
