package gpu

import (
	"reflect"
	"testing"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

// A reduction is a launch of its own in stream and graph mode, between
// the interpreter's runs, never on the side.
func TestSplitPlanReduce(t *testing.T) {
	red := kernels.PlanStep{Kind: kernels.StepReduce, N: 4 << 20, Value: kernels.ReduceStepValue(kernels.BF16, kernels.Max), Aux: kernels.CopyLocal}
	steps := []kernels.PlanStep{{Kind: kernels.StepWait}, red, {Kind: kernels.StepPutSignal, N: 64}, red, red}
	got := SplitPlan(steps, 0)
	want := []PlanSegment{{From: 0, To: 1}, {From: 1, To: 2, Copy: true}, {From: 2, To: 3}, {From: 3, To: 4, Copy: true}, {From: 4, To: 5, Copy: true}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("segment %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if dt, op := kernels.ReduceStepOf(red.Value); dt != kernels.BF16 || op != kernels.Max {
		t.Errorf("step value: %s %s", dt, op)
	}
	if s := SegmentsString(got, steps, 0); s != "interpreter=2 copy=3" {
		t.Errorf("segments: %s", s)
	}
}

// Reductions into one place (the same size, type and operator, no source
// overlapping it) are one segment, a chain of at most PlanChainMax; one
// of another type or place, or reading the place, ends it.
func TestSplitPlanChainsReductions(t *testing.T) {
	const n = planChainMax
	v := kernels.ReduceStepValue(kernels.F32, kernels.Sum)
	red := func(dst, src uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepReduce, N: n, Value: v, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src)}
	}
	at := func(k uint64) uint64 { return k << 30 }
	var steps []kernels.PlanStep
	for k := range kernels.PlanChainMax + 1 {
		steps = append(steps, red(at(0), at(uint64(k+1))))
	}
	other := red(at(0), at(20))
	other.Value = kernels.ReduceStepValue(kernels.BF16, kernels.Sum)
	steps = append(steps, other, red(at(0), at(0)+n/2), red(at(9), at(1)), red(at(9), at(2)))
	got := SplitPlan(steps, 0)
	c := kernels.PlanChainMax
	want := []PlanSegment{{0, c, true, false}, {c, c + 1, true, false}, {c + 1, c + 2, true, false}, {c + 2, c + 3, true, false}, {c + 3, c + 5, true, false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	// A chain is one launch where 16-byte aligned, else one a reduction.
	if s := SegmentsString(got, steps, 0); s != "interpreter=0 copy=5" {
		t.Errorf("aligned: %s", s)
	}
	odd := append([]kernels.PlanStep(nil), steps...)
	odd[c+3].Src += 4
	odd[c+4].Src += 4
	if s := SegmentsString(SplitPlan(odd, 0), odd, 0); s != "interpreter=0 copy=6" {
		t.Errorf("a chain off 16 bytes: %s", s)
	}
	// Above planChainMax bytes each reduction is a launch of its own.
	big := []kernels.PlanStep{red(at(0), at(1)), red(at(0), at(2))}
	big[0].N, big[1].N = n+16, n+16
	if got := SplitPlan(big, 0); !reflect.DeepEqual(got, []PlanSegment{{0, 1, true, false}, {1, 2, true, false}}) {
		t.Errorf("reductions above planChainMax: %v", got)
	}
}
