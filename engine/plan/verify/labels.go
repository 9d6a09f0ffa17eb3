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
	// chunks are the segments in order, in runs of at most 2*chunkMax
	// (none empty): a put into a window of a thousand segments moves
	// those of its run, not every one after it.
	chunks [][]seg
	// ends[k] is where run k ends (its last segment's hi): find searches
	// them, not the runs, which lie all over the heap.
	ends []uint64
	// acc are the narrow accesses, sorted by lo; maxLen is the longest
	// it ever held, so that a new access only looks at those starting
	// within maxLen before it. wide are the long ones (isWide), which
	// every access looks at. Both hold references into the sim's pool
	// (accPool), not pointers.
	acc, wide []accRef
	maxLen    uint64
}

// chunkMax is the length a run of segments is cut into once it grows
// past twice that.
const chunkMax = 16

func newMemory(rank, buf int, size uint64) *memory {
	m := &memory{size: size}
	if size > 0 {
		m.chunks = [][]seg{{{lo: 0, hi: size, lab: label{org: rank, buf: buf}}}}
		m.ends = []uint64{size}
	}
	return m
}

// find returns the run and index of the segment holding byte x, or
// len(m.chunks) when x is past the end.
func (m *memory) find(x uint64) (c, i int) {
	c = sort.Search(len(m.ends), func(k int) bool { return m.ends[k] > x })
	if c == len(m.chunks) {
		return c, 0
	}
	ch := m.chunks[c]
	return c, sort.Search(len(ch), func(k int) bool { return ch[k].hi > x })
}

// segs returns every segment in order (for tests).
func (m *memory) segs() []seg {
	var out []seg
	for _, ch := range m.chunks {
		out = append(out, ch...)
	}
	return out
}

// get returns copies of the segments covering [lo, hi), cut to it.
func (m *memory) get(lo, hi uint64) []seg { return m.getInto(nil, lo, hi) }

// getInto is get appending to out (out[:0] reuses its array).
func (m *memory) getInto(out []seg, lo, hi uint64) []seg {
	if lo >= hi {
		return out
	}
	c, i := m.find(lo)
	for ; c < len(m.chunks); c, i = c+1, 0 {
		ch := m.chunks[c]
		for ; i < len(ch); i++ {
			s := ch[i]
			if s.lo >= hi {
				return out
			}
			if s.lo < lo {
				s.lab.off += lo - s.lo
				s.lo = lo
			}
			s.hi = min(s.hi, hi)
			out = append(out, s)
		}
	}
	return out
}

// put writes the segments src (as get returned them, starting at
// src[0].lo) at dst, marking them as written by by. The segments it
// overlaps are replaced by the part of the first before dst, src, and the
// part of the last after the end.
func (m *memory) put(dst uint64, src []seg, by *opRef) {
	if len(src) == 0 {
		return
	}
	shift := func(x uint64) uint64 { return x - src[0].lo + dst }
	lo, hi := dst, shift(src[len(src)-1].hi)
	if len(m.chunks) == 0 {
		ch := make([]seg, len(src))
		for k, s := range src {
			s.lo, s.hi = shift(s.lo), shift(s.hi)
			s.lab.by = by
			ch[k] = s
		}
		m.chunks, m.ends = [][]seg{ch}, []uint64{ch[len(ch)-1].hi}
		return
	}
	ci, i := m.find(lo)
	if ci == len(m.chunks) {
		// Past the end (bounds are checked before): after the last.
		ci = len(m.chunks) - 1
		i = len(m.chunks[ci])
	}
	// Segments (ci, i) through (cj, j) are replaced: cj, j holds hi-1, or
	// is the last.
	cj, j := m.find(hi - 1)
	if cj == len(m.chunks) {
		cj = len(m.chunks) - 1
		j = len(m.chunks[cj]) - 1
	}
	var left, right seg
	hasLeft := i < len(m.chunks[ci]) && m.chunks[ci][i].lo < lo
	if hasLeft {
		left = m.chunks[ci][i]
		left.hi = lo
	}
	hasRight := j >= 0 && m.chunks[cj][j].hi > hi && (cj > ci || j >= i)
	if hasRight {
		right = m.chunks[cj][j]
		right.lab.off += hi - right.lo
		right.lo = hi
	}
	n := len(src)
	if hasLeft {
		n++
	}
	if hasRight {
		n++
	}
	var ch []seg
	k := i
	if ci == cj {
		ch = splice(m.chunks[ci], i, max(j+1, i), n)
	} else {
		first, last := m.chunks[ci][:i], m.chunks[cj][j+1:]
		ch = make([]seg, len(first)+n+len(last))
		copy(ch, first)
		copy(ch[len(first)+n:], last)
	}
	if hasLeft {
		ch[k] = left
		k++
	}
	for _, s := range src {
		s.lo, s.hi = shift(s.lo), shift(s.hi)
		s.lab.by = by
		ch[k] = s
		k++
	}
	if hasRight {
		ch[k] = right
	}
	m.replaceChunks(ci, cj+1, ch)
}

// splice replaces ch[i:j] with n segments' room (their values left for
// the caller to write) in place where ch's array has room.
func splice(ch []seg, i, j, n int) []seg {
	old, tail := len(ch), len(ch)-j
	size := i + n + tail
	if size > cap(ch) {
		grown := make([]seg, size, size+size/4+4)
		copy(grown, ch[:i])
		copy(grown[i+n:], ch[j:])
		return grown
	}
	if i+n != j {
		ch = ch[:max(size, old)]
		copy(ch[i+n:], ch[j:old])
		clear(ch[size:])
		ch = ch[:size]
	}
	return ch
}

// replaceChunks puts ch in place of runs [a, b), cut into runs of
// chunkMax when it is longer than twice that.
func (m *memory) replaceChunks(a, b int, ch []seg) {
	if len(ch) <= 2*chunkMax && b == a+1 {
		m.chunks[a], m.ends[a] = ch, ch[len(ch)-1].hi
		return
	}
	var runs [][]seg
	if len(ch) <= 2*chunkMax {
		runs = [][]seg{ch}
	} else {
		for len(ch) > 0 {
			k := min(chunkMax, len(ch))
			runs = append(runs, append(make([]seg, 0, chunkMax+chunkMax/4), ch[:k]...))
			ch = ch[k:]
		}
	}
	m.chunks = append(m.chunks[:a], append(runs, m.chunks[b:]...)...)
	ends := make([]uint64, len(runs))
	for k, r := range runs {
		ends[k] = r[len(r)-1].hi
	}
	m.ends = append(m.ends[:a], append(ends, m.ends[b:]...)...)
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
	m.chunks = [][]seg{{{lo: 0, hi: m.size, lab: label{org: f.rank, buf: -1, fill: f, by: f}}}}
	m.ends = []uint64{m.size}
}
