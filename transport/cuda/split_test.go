package cuda

import (
	"reflect"
	"testing"

	"github.com/luacoll/luacoll/kernels"
)

// SplitPlan leaves copies up to the inline size (and every signal, wait
// and fill) to the interpreter and gives each larger copy a launch of its
// own; an inline size below kernels.PlanSmall counts as PlanSmall.
func TestSplitPlan(t *testing.T) {
	wait := kernels.PlanStep{Kind: kernels.StepWait}
	sig := kernels.PlanStep{Kind: kernels.StepAdd}
	copyOf := func(n uint64) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepCopy, N: n} }
	fill := kernels.PlanStep{Kind: kernels.StepFillByte, N: 1 << 20}
	steps := []kernels.PlanStep{wait, copyOf(1024), sig, copyOf(1 << 20), copyOf(1 << 20), wait, fill, copyOf(100)}
	for _, c := range []struct {
		inline uint64
		want   []PlanSegment
	}{
		{64 << 10, []PlanSegment{{0, 3, false}, {3, 4, true}, {4, 5, true}, {5, 8, false}}},
		{0, []PlanSegment{{0, 1, false}, {1, 2, true}, {2, 3, false}, {3, 4, true}, {4, 5, true}, {5, 8, false}}},
		{2 << 20, []PlanSegment{{0, 8, false}}},
	} {
		got := SplitPlan(steps, c.inline)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("inline %d: %v, want %v", c.inline, got, c.want)
		}
	}
	if got := SplitPlan([]kernels.PlanStep{copyOf(1 << 20)}, 0); !reflect.DeepEqual(got, []PlanSegment{{0, 1, true}}) {
		t.Errorf("a lone large copy: %v", got)
	}
	if got := SegmentsString(SplitPlan(steps, 64<<10)); got != "interpreter=2 copy=2" {
		t.Errorf("SegmentsString: %q", got)
	}
}
