package plan

import "github.com/luacoll/luacoll/kernels"

// coalesceReleases reorders device-mode steps so that a run of puts pays
// one system-wide release instead of one a put. Between two steps of
// other kinds (a wait, a reduction, a fill, a put_signal or line step, or
// a moving one), every copy goes first, in its order, then every store or
// add (signals and counters), in theirs; the first of those after a copy
// stays a release, the ones after it are relaxed (kernels.SigCovered):
// that release already orders every copy before them.
//
// It only delays signals, and only past copies, never past a wait: a copy
// may land before a signal that preceded it in the op list, which no peer
// can rely on, since nothing this rank learned in between (no wait) could
// have made the copy safe only after that signal. moving marks the steps
// whose values move; they keep their places, so their indices hold.
func coalesceReleases(steps []kernels.PlanStep, moving map[int]bool) {
	movable := func(i int) bool {
		if moving[i] {
			return false
		}
		k := steps[i].Kind
		return k == kernels.StepCopy || k == kernels.StepStore || k == kernels.StepAdd
	}
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

// coalesceRun reorders one run of copies, stores and adds (copies first)
// and marks the releases a copy-free prefix of them covers.
func coalesceRun(run []kernels.PlanStep) {
	copies := 0
	for _, s := range run {
		if s.Kind == kernels.StepCopy {
			copies++
		}
	}
	if copies == 0 {
		return
	}
	out := make([]kernels.PlanStep, 0, len(run))
	for _, s := range run {
		if s.Kind == kernels.StepCopy {
			out = append(out, s)
		}
	}
	first := true
	for _, s := range run {
		if s.Kind == kernels.StepCopy {
			continue
		}
		if !first {
			s.Cmp |= kernels.SigCovered
		}
		first = false
		out = append(out, s)
	}
	copy(run, out)
}

// chainMax is the longest run of reductions the interpreter takes as one
// chain (reduce.cu's LC_CHAIN_MAX).
const chainMax = kernels.PlanChainMax

// chainReduces marks runs of reduce steps into the same destination (the
// same bytes, type and operator; no source overlapping it) for the
// interpreter to run as one pass: the first step's Count is the run's
// length, at most chainMax. The interpreter runs them one by one where an
// address is not 16-byte aligned; the bits are the same either way.
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
		i = j
	}
}
