package gpu

// How stream and graph mode cut a replay of a plan's steps into launches
// (SplitPlan) and what each copy segment launches (launchGroups).

import (
	"fmt"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// PlanSegment is a part of a plan's replay (SplitPlan): one launch of the
// plan interpreter over steps [From, To), or (Copy) the copies or
// reductions of those steps (launchGroups says what they launch).
type PlanSegment struct {
	From, To int
	Copy     bool
	// Aside: a copy of at least planAsideMin bytes within the rank's own
	// memory (kernels.CopyLocal), run by a copy kernel on a side stream
	// beside the launches after it, up to the next launch of the
	// interpreter, a copy that touches its bytes, or the replay's end.
	Aside bool
}

// planChainMax is the largest reduction that stream and graph mode run
// in a chain with the reductions into the same place after it (one
// launch); larger ones are a launch each. On 4 x H200 the chains took
// less time than a launch a reduction up to 4 MiB reductions and more
// from 16 MiB (docs/results/reductions.md, "Chains").
const planChainMax = 4 << 20

// planAsideMin is the smallest own-memory copy a plan runs on the side.
const planAsideMin = 1 << 20

// SplitPlan cuts a replay of steps into segments: each copy of more than
// inline bytes alone (a copy engine's, or a put kernel's over the whole
// GPU), or with the copies of the same source and size right after it
// (a chunk put to several peers: up to kernels.PutMultiMax, no place
// overlapping the source or another), which a put kernel runs as one
// launch (kernels.PutMulti); each reduction alone, or with the
// reductions into the same place after it (up to kernels.PlanChainMax of
// up to planChainMax bytes, none reading it), one launch of the chain
// kernel where aligned (kernels.ReduceChain); each run of other steps one
// launch of the interpreter. inline below kernels.PlanSmall counts as
// kernels.PlanSmall.
func SplitPlan(steps []kernels.PlanStep, inline uint64) []PlanSegment {
	inline = max(inline, kernels.PlanSmall)
	var segs []PlanSegment
	from := 0
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		wide := st.Kind == kernels.StepCopy && st.N > inline
		if !wide && st.Kind != kernels.StepReduce {
			continue
		}
		if from < i {
			segs = append(segs, PlanSegment{From: from, To: i})
		}
		aside := wide && aside(st)
		j := i + 1
		switch {
		case wide && !aside && !overlaps(st.Dst, st.N, st.Src, st.N):
			for j < len(steps) && j-i < kernels.PutMultiMax && fansOut(steps[i:j], steps[j]) {
				j++
			}
		case st.Kind == kernels.StepReduce && st.N <= planChainMax && !overlaps(st.Dst, st.N, st.Src, st.N):
			for j < len(steps) && j-i < kernels.PlanChainMax && chains(st, steps[j]) {
				j++
			}
		}
		segs = append(segs, PlanSegment{From: i, To: j, Copy: true, Aside: aside})
		from = j
		i = j - 1
	}
	if from < len(steps) {
		segs = append(segs, PlanSegment{From: from, To: len(steps)})
	}
	return segs
}

// aside reports whether wide copy st runs on the plan's side stream.
func aside(st kernels.PlanStep) bool { return st.Aux == kernels.CopyLocal && st.N >= planAsideMin }

// chains reports whether reduce step s joins the chain that r heads: the
// same place, size, type and operator, its source apart from the place.
func chains(r, s kernels.PlanStep) bool {
	return s.Kind == kernels.StepReduce && s.Dst == r.Dst && s.N == r.N && s.Value == r.Value && !overlaps(s.Dst, s.N, s.Src, s.N)
}

// fansOut reports whether copy step s joins the group of copies g: the
// same source and size, not aside, its place meeting neither the source
// nor a member's.
func fansOut(g []kernels.PlanStep, s kernels.PlanStep) bool {
	if s.Kind != kernels.StepCopy || s.Src != g[0].Src || s.N != g[0].N || aside(s) || overlaps(s.Dst, s.N, s.Src, s.N) {
		return false
	}
	for _, m := range g {
		if overlaps(s.Dst, s.N, m.Dst, m.N) {
			return false
		}
	}
	return true
}

// SegmentsString says what a replay of steps cut into segs launches
// ("interpreter=2 copy=1"): the interpreter's launches, and the copies'
// and reductions' (a group of copies one where a put kernel runs it, up
// to kmax bytes a copy, one a copy above; a chain one).
func SegmentsString(segs []PlanSegment, steps []kernels.PlanStep, kmax uint64) string {
	k, c := 0, 0
	for _, g := range segs {
		if g.Copy {
			c += len(launchGroups(steps[g.From:g.To], kmax))
		} else {
			k++
		}
	}
	return fmt.Sprintf("interpreter=%d copy=%d", k, c)
}

// launchGroups cuts a copy segment's steps (SplitPlan) into what
// launchCopy launches: the whole group where one launch takes it (a put
// kernel to several places, up to kmax bytes a copy; a chain of
// reductions, 16-byte aligned), else one step a launch.
func launchGroups(group []kernels.PlanStep, kmax uint64) [][]kernels.PlanStep {
	st := group[0]
	one := st.N <= kmax
	if st.Kind == kernels.StepReduce {
		one = kernels.ChainAligned(st.Dst, sources(group), st.N)
	}
	if one || len(group) == 1 {
		return [][]kernels.PlanStep{group}
	}
	out := make([][]kernels.PlanStep, len(group))
	for i := range group {
		out[i] = group[i : i+1]
	}
	return out
}

// sources lists the steps' sources.
func sources(steps []kernels.PlanStep) []cuda.DevicePtr {
	out := make([]cuda.DevicePtr, len(steps))
	for i, m := range steps {
		out[i] = m.Src
	}
	return out
}
