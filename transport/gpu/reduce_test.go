package gpu

import (
	"testing"

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
	if s := SegmentsString(got); s != "interpreter=2 copy=3" {
		t.Errorf("segments: %s", s)
	}
}
