package gpu

import (
	"reflect"
	"testing"

	"github.com/luacoll/luacoll/cuda"
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
		{64 << 10, []PlanSegment{{0, 3, false, false}, {3, 4, true, false}, {4, 5, true, false}, {5, 8, false, false}}},
		{0, []PlanSegment{{0, 1, false, false}, {1, 2, true, false}, {2, 3, false, false}, {3, 4, true, false}, {4, 5, true, false}, {5, 8, false, false}}},
		{2 << 20, []PlanSegment{{0, 8, false, false}}},
	} {
		got := SplitPlan(steps, c.inline)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("inline %d: %v, want %v", c.inline, got, c.want)
		}
	}
	if got := SplitPlan([]kernels.PlanStep{copyOf(1 << 20)}, 0); !reflect.DeepEqual(got, []PlanSegment{{0, 1, true, false}}) {
		t.Errorf("a lone large copy: %v", got)
	}
	if got := SegmentsString(SplitPlan(steps, 64<<10), steps, 0); got != "interpreter=2 copy=2" {
		t.Errorf("SegmentsString: %q", got)
	}
	// A copy within the rank's own memory of planAsideMin bytes or more
	// goes on the side; a smaller one, or one to a peer, does not.
	own := func(n uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepCopy, N: n, Aux: kernels.CopyLocal}
	}
	got := SplitPlan([]kernels.PlanStep{own(planAsideMin), copyOf(planAsideMin), own(planAsideMin - 1), sig}, 64<<10)
	want := []PlanSegment{{0, 1, true, true}, {1, 2, true, false}, {2, 3, true, false}, {3, 4, false, false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("own copies: %v, want %v", got, want)
	}
}

// overlaps is true for byte ranges that share a byte, and only then.
func TestOverlaps(t *testing.T) {
	for _, c := range []struct {
		a, n, b, m uint64
		want       bool
	}{{0, 10, 10, 5, false}, {0, 11, 10, 5, true}, {10, 5, 0, 10, false}, {10, 5, 0, 11, true}, {5, 1, 0, 100, true}, {0, 0, 0, 10, false}} {
		if got := overlaps(cuda.DevicePtr(c.a), c.n, cuda.DevicePtr(c.b), c.m); got != c.want {
			t.Errorf("[%d,+%d) and [%d,+%d): %v", c.a, c.n, c.b, c.m, got)
		}
	}
}

// A chunk put to several peers (copies of one source and size right after
// each other, no place meeting the source or another) is one segment, of
// at most kernels.PutMultiMax copies; a copy of another size or source,
// an own copy on the side, or a place overlapping a member's ends it.
func TestSplitPlanGroupsFanOut(t *testing.T) {
	const n = 1 << 20
	put := func(dst, src uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepCopy, N: n, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src)}
	}
	sig := kernels.PlanStep{Kind: kernels.StepAdd}
	src := uint64(1 << 40)
	at := func(k uint64) uint64 { return k << 30 }
	steps := []kernels.PlanStep{put(at(1), src), put(at(2), src), put(at(3), src), sig, sig, sig}
	want := []PlanSegment{{0, 3, true, false}, {3, 6, false, false}}
	if got := SplitPlan(steps, 64<<10); !reflect.DeepEqual(got, want) {
		t.Errorf("fan-out: %v, want %v", got, want)
	}
	// One put kernel takes the group; the copy engines one copy each.
	for kmax, want := range map[uint64]string{n: "interpreter=1 copy=1", n - 1: "interpreter=1 copy=3"} {
		if got := SegmentsString(SplitPlan(steps, 64<<10), steps, kmax); got != want {
			t.Errorf("kmax %d: %s, want %s", kmax, got, want)
		}
	}
	var many []kernels.PlanStep
	for k := range kernels.PutMultiMax + 2 {
		many = append(many, put(at(uint64(k+1)), src))
	}
	want = []PlanSegment{{0, kernels.PutMultiMax, true, false}, {kernels.PutMultiMax, kernels.PutMultiMax + 2, true, false}}
	if got := SplitPlan(many, 64<<10); !reflect.DeepEqual(got, want) {
		t.Errorf("%d copies: %v, want %v", len(many), got, want)
	}
	other := put(at(3), src+n)
	own := put(at(4), src)
	own.Aux, own.N = kernels.CopyLocal, planAsideMin
	for name, third := range map[string]kernels.PlanStep{
		"another source": other, "overlapping a member": put(at(2)+8, src), "overlapping the source": put(src+n/2, src), "own on the side": own,
	} {
		got := SplitPlan([]kernels.PlanStep{put(at(1), src), put(at(2), src), third}, 64<<10)
		want := []PlanSegment{{0, 2, true, false}, {2, 3, true, name == "own on the side"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
