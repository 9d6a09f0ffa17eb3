package plan

import (
	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// coalesceReleases reorders device-mode steps so that a run of small puts
// to several peers waits for their bytes to land once, not once a put.
// Between two steps of other kinds (a wait, a reduction, a fill, a
// put_signal or line step, a moving one, or a copy above
// copyMax: coalesceCopyMax, or any size in a spread plan), every copy goes first, in its order, then every store
// or add (signals and counters), in theirs. Each of those stays a release,
// and a run of them shares one fence (sync_plan.cu): it waits for every
// copy before it once, and no signal waits for the one before it to land.
// Large copies stay where they are, so that a
// schedule that cuts a chunk into pieces to pipeline them still sends
// each piece's signal as soon as the piece is out.
//
// It only delays signals, and only past copies, never past a wait: a copy
// may land before a signal that preceded it in the op list, which no peer
// can rely on, since nothing this rank learned in between (no wait) could
// have made the copy safe only after that signal. moving marks the steps
// whose values move; they keep their places, so their indices hold.
func coalesceReleases(steps []kernels.PlanStep, moving map[int]bool, copyMax uint64) {
	movable := func(i int) bool { return movableStep(steps[i], moving[i], copyMax) }
	for i := 0; i < len(steps); {
		if !movable(i) {
			i++
			continue
		}
		j := i
		for j < len(steps) && movable(j) {
			j++
		}
		coalesceRun(steps[i:j])
		i = j
	}
}

// fanOutReleases is coalesceReleases for stream and graph mode, where
// each wide copy is a launch of its own and each run of other steps one
// of the interpreter: in a run of copies to different peers (peerOf gives
// a step's peer) and the stores and adds between them (a chunk put to
// every peer with its signal), the copies go first and the signals after
// them, so the copies launch back to back (and may go as one,
// gpu.SplitPlan) and the signals take one interpreter launch, not one a
// copy. A copy to a peer the run already has ends the run: the pieces of
// a pipelined schedule to one peer keep each piece's signal right after
// the piece. It delays signals past copies only, never past a wait (see
// coalesceReleases); moving steps stay where they are.
func fanOutReleases(steps []kernels.PlanStep, moving map[int]bool, peerOf func(kernels.PlanStep) int) {
	movable := func(i int) bool { return movableStep(steps[i], moving[i], ^uint64(0)) }
	for i := 0; i < len(steps); {
		if !movable(i) {
			i++
			continue
		}
		seen := map[int]bool{}
		j := i
		for ; j < len(steps) && movable(j); j++ {
			if steps[j].Kind != kernels.StepCopy {
				continue
			}
			q := peerOf(steps[j])
			if seen[q] {
				break
			}
			seen[q] = true
		}
		coalesceRun(steps[i:j])
		i = j
	}
}

// movableStep reports whether step s may take part in a run that
// coalesceReleases or fanOutReleases reorders: a copy of at most copyMax
// bytes, a store or an add, none of them moving.
func movableStep(s kernels.PlanStep, moving bool, copyMax uint64) bool {
	if moving {
		return false
	}
	switch s.Kind {
	case kernels.StepCopy:
		return s.N <= copyMax
	case kernels.StepStore, kernels.StepAdd:
		return true
	}
	return false
}

// coalesceCopyMax is the largest copy a run of coalesceReleases takes
// (the puts of small collectives: a release is a large part of their
// time, and a small part of a larger copy's) in a plan on one block. A
// spread plan's runs take copies of any size: its signals cost every
// block a fence and block 0 a meeting (sync_grid.cu), and its copies to
// several peers overlap when none waits for a signal between them.
const coalesceCopyMax = 16 << 10

// coalesceRun reorders one run of copies, stores and adds: copies first.
func coalesceRun(run []kernels.PlanStep) {
	out := make([]kernels.PlanStep, 0, len(run))
	for _, s := range run {
		if s.Kind == kernels.StepCopy {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return
	}
	for _, s := range run {
		if s.Kind != kernels.StepCopy {
			out = append(out, s)
		}
	}
	copy(run, out)
}

// copyHeads reports whether copy step c, right before reduce step r, may
// head r's chain: it writes the bytes r reduces into, from a source that
// is those bytes or lies apart from them (the chain reads its source
// where the copy would have left it).
func copyHeads(c, r kernels.PlanStep) bool {
	if c.Kind != kernels.StepCopy || c.Dst != r.Dst || c.N != r.N || c.N == 0 {
		return false
	}
	src, dst := uint64(c.Src), uint64(c.Dst)
	return src == dst || src+c.N <= dst || dst+c.N <= src
}

// chainMax is the longest run of reductions the interpreter takes as one
// chain (reduce.cu's LC_CHAIN_MAX).
const chainMax = kernels.PlanChainMax

// chainReduces marks runs of reduce steps into the same destination (the
// same bytes, type and operator; no source overlapping it) for the
// interpreter to run as one pass: the first step's Count is the run's
// length, at most chainMax. A copy right before the run into the same
// bytes (copyHeads) gets the run's length as its Count too: the chain
// then starts from the copy's source, and nothing is copied. The
// interpreter runs them one by one where an address is not 16-byte
// aligned; the bits are the same either way.
func chainReduces(steps []kernels.PlanStep) {
	for i := 0; i < len(steps); {
		s := steps[i]
		if s.Kind != kernels.StepReduce {
			i++
			continue
		}
		j := i + 1
		for j < len(steps) && j-i < chainMax {
			t := steps[j]
			if t.Kind != kernels.StepReduce || t.Dst != s.Dst || t.N != s.N || t.Value != s.Value {
				break
			}
			j++
		}
		overlaps := false
		for k := i; k < j; k++ {
			src := uint64(steps[k].Src)
			if src < uint64(s.Dst)+s.N && uint64(s.Dst) < src+s.N {
				overlaps = true
			}
		}
		if j-i > 1 && !overlaps {
			steps[i].Count = uint32(j - i)
		}
		if i > 0 && !overlaps && copyHeads(steps[i-1], s) {
			steps[i-1].Count = uint32(j - i)
		}
		i = j
	}
}

// groupLines marks runs of line steps for the interpreter to run as one
// step of every thread (sync_plan.cu's line groups): up to
// kernels.PlanLineGroupMax drains in a row (the first's Count gets the
// run's length << kernels.LineGroupShift), whose lines are then polled
// at once, and line puts in a row of one source and size to different
// places (the first's Count gets the run's length), each word read once.
// Drains in a row are the drains before one wait, or before waits with no
// step of their own between them: nothing runs between them either way.
func groupLines(steps []kernels.PlanStep) {
	for i := 0; i < len(steps); {
		s := steps[i]
		j := i + 1
		switch s.Kind {
		case kernels.StepLineWait:
			for j < len(steps) && j-i < kernels.PlanLineGroupMax && steps[j].Kind == kernels.StepLineWait {
				j++
			}
			if j-i > 1 {
				steps[i].Count |= uint32(j-i) << kernels.LineGroupShift
			}
		case kernels.StepLinePut:
			for j < len(steps) && j-i < kernels.PlanLineGroupMax && steps[j].Kind == kernels.StepLinePut &&
				steps[j].Src == s.Src && steps[j].N == s.N {
				j++
			}
			if j-i > 1 {
				steps[i].Count = uint32(j - i)
			}
		}
		i = j
	}
}

// groupCopies marks runs of wide copies of one source and size (a put to
// every peer of one chunk, and the rank's own copy of it), none heading a
// chain, for the interpreter to run as one step, every thread copying its
// share to each place with no block barrier between them: the first
// step's Count holds the run's length << kernels.LineGroupShift (at most
// kernels.PlanLineGroupMax). A copy whose place overlaps its source (but
// for the source itself) or an earlier member's place ends a run. The
// interpreter runs them one by one where they are not such copies (a
// grid step of a spread plan between them).
func groupCopies(steps []kernels.PlanStep) {
	member := func(s, first kernels.PlanStep) bool {
		return s.Kind == kernels.StepCopy && s.Wide() && s.Count == 0 && s.Src == first.Src && s.N == first.N &&
			(s.Dst == s.Src || !overlapping(s.Dst, s.Src, s.N))
	}
	for i := 0; i < len(steps); {
		j := i + 1
		if member(steps[i], steps[i]) {
			// No member's place overlaps an earlier one's: they run with
			// no order between them.
			for j < len(steps) && j-i < kernels.PlanLineGroupMax && member(steps[j], steps[i]) &&
				!overlapsAny(steps[i:j], steps[j].Dst, steps[j].N) {
				j++
			}
			if j-i > 1 {
				steps[i].Count = uint32(j-i) << kernels.LineGroupShift
			}
		}
		i = j
	}
}

// groupWaits marks runs of waits (the waits for several peers' signals
// that a collective's step ends with) for the interpreter to poll side by
// side, one thread each, as one step: the first's Count holds the run's
// length << kernels.WaitGroupShift above its count of slots (at most
// kernels.PlanLineGroupMax waits a run). Only waits for a value at or
// above a target (>=, >) join: one in a group may be checked before the
// waits ahead of it are met, which is the same for a wait on a value that
// only rises, not for one that may hold and then stop holding (==, <=, a
// slot a peer sets lower).
func groupWaits(steps []kernels.PlanStep) {
	member := func(s kernels.PlanStep) bool {
		return s.Kind == kernels.StepWait && s.Count <= kernels.WaitSlotsMask && (s.Cmp == kernels.CmpGE || s.Cmp == kernels.CmpGT)
	}
	for i := 0; i < len(steps); {
		j := i + 1
		if member(steps[i]) {
			for j < len(steps) && j-i < kernels.PlanLineGroupMax && member(steps[j]) {
				j++
			}
			if j-i > 1 {
				steps[i].Count |= uint32(j-i) << kernels.WaitGroupShift
			}
		}
		i = j
	}
}

// overlapping reports whether n bytes at a and n bytes at b meet.
func overlapping(a, b cuda.DevicePtr, n uint64) bool {
	return uint64(a) < uint64(b)+n && uint64(b) < uint64(a)+n
}

// overlapsAny reports whether n bytes at dst meet the place of any of
// steps.
func overlapsAny(steps []kernels.PlanStep, dst cuda.DevicePtr, n uint64) bool {
	for _, s := range steps {
		if uint64(dst) < uint64(s.Dst)+s.N && uint64(s.Dst) < uint64(dst)+n {
			return true
		}
	}
	return false
}
