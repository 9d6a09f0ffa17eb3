package plan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/kernels"
)

func stepsString(steps []kernels.PlanStep) string {
	var b strings.Builder
	for _, s := range steps {
		name := map[kernels.StepKind]string{kernels.StepCopy: "copy", kernels.StepStore: "store", kernels.StepAdd: "add",
			kernels.StepWait: "wait", kernels.StepReduce: "reduce"}[s.Kind]
		fmt.Fprintf(&b, "%s%d", name, s.Op)
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

// Puts with signals between two waits: the copies go first, then the
// signals; waits, reductions, moving steps and copies above
// coalesceCopyMax keep their places, and a run without a copy is left as
// it is.
func TestCoalesceReleases(t *testing.T) {
	c := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepCopy, Op: op, N: 1024} }
	a := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepAdd, Op: op} }
	st := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepStore, Op: op} }
	w := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepWait, Op: op} }
	r := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepReduce, Op: op} }
	big := func(op uint32) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepCopy, Op: op, N: coalesceCopyMax + 1}
	}
	for _, tc := range []struct {
		steps  []kernels.PlanStep
		moving map[int]bool
		want   string
	}{
		{[]kernels.PlanStep{c(0), a(0), c(1), a(1), c(2), a(2), w(3), w(4), r(5)}, nil,
			"copy0 copy1 copy2 add0 add1 add2 wait3 wait4 reduce5"},
		{[]kernels.PlanStep{w(0), a(1), c(2), st(2), a(2), w(3), c(4), a(4)}, nil,
			"wait0 copy2 add1 store2 add2 wait3 copy4 add4"},
		// A moving step (a barrier's store) ends a run where it is.
		{[]kernels.PlanStep{c(0), a(0), st(1), c(2), a(2)}, map[int]bool{2: true},
			"copy0 add0 store1 copy2 add2"},
		{[]kernels.PlanStep{a(0), a(1), w(2)}, nil, "add0 add1 wait2"},
		// A large copy (a pipelined piece) keeps its signal right after it.
		{[]kernels.PlanStep{big(0), a(0), c(1), a(1), big(2), a(2)}, nil,
			"copy0 copy1 add0 add1 copy2 add2"},
	} {
		steps := append([]kernels.PlanStep(nil), tc.steps...)
		coalesceReleases(steps, tc.moving, coalesceCopyMax)
		if got := stepsString(steps); got != tc.want {
			t.Errorf("%s: got %s, want %s", stepsString(tc.steps), got, tc.want)
		}
	}
}

// Reductions into one destination, same type and operator, are marked as
// a chain on their first step (at most chainMax); a different
// destination, a source overlapping the destination, or another step
// ends one.
func TestChainReduces(t *testing.T) {
	r := func(dst, src uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepReduce, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: 64, Value: 1}
	}
	cp := func(dst, src, n uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepCopy, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: n}
	}
	counts := func(steps []kernels.PlanStep) []uint32 {
		var c []uint32
		for _, s := range steps {
			c = append(c, s.Count)
		}
		return c
	}
	for _, tc := range []struct {
		steps []kernels.PlanStep
		want  []uint32
	}{
		{[]kernels.PlanStep{r(0, 1000), r(0, 2000), r(0, 3000), {Kind: kernels.StepWait}, r(0, 4000)}, []uint32{3, 0, 0, 0, 0}},
		{[]kernels.PlanStep{r(0, 1000), r(500, 2000), r(500, 3000)}, []uint32{0, 2, 0}},
		{[]kernels.PlanStep{r(0, 1000), r(0, 32)}, []uint32{0, 0}},
		// A copy into the chain's bytes heads it (even a chain of one);
		// not one that overlaps them in part, writes other bytes, or
		// heads a chain that overlaps its destination.
		{[]kernels.PlanStep{cp(0, 5000, 64), r(0, 1000), r(0, 2000)}, []uint32{2, 2, 0}},
		{[]kernels.PlanStep{cp(0, 5000, 64), r(0, 1000)}, []uint32{1, 0}},
		{[]kernels.PlanStep{cp(0, 0, 64), r(0, 1000)}, []uint32{1, 0}},
		{[]kernels.PlanStep{cp(0, 32, 64), r(0, 1000), r(0, 2000)}, []uint32{0, 2, 0}},
		{[]kernels.PlanStep{cp(0, 5000, 32), r(0, 1000)}, []uint32{0, 0}},
		{[]kernels.PlanStep{cp(0, 5000, 64), r(0, 1000), r(0, 32)}, []uint32{0, 0, 0}},
		{append(make([]kernels.PlanStep, 0), r(0, 100), r(0, 200), r(0, 300), r(0, 400), r(0, 500), r(0, 600), r(0, 700), r(0, 800), r(0, 900), r(0, 1000)),
			[]uint32{8, 0, 0, 0, 0, 0, 0, 0, 2, 0}},
	} {
		chainReduces(tc.steps)
		if got := counts(tc.steps); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("counts %v, want %v", got, tc.want)
		}
	}
}

// Drains in a row form a group (up to kernels.PlanLineGroupMax, the
// length in the first's Count above its send-first bit); line puts in a
// row of one source and size do (the length in the first's Count); other
// steps, or another source, end a run.
func TestGroupLines(t *testing.T) {
	drain := func(first uint32) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepLineWait, N: 8, Count: first}
	}
	put := func(src uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepLinePut, Src: cuda.DevicePtr(src), N: 1024}
	}
	wait := kernels.PlanStep{Kind: kernels.StepWait}
	sh := kernels.LineGroupShift
	for _, tc := range []struct {
		steps []kernels.PlanStep
		want  []uint32
	}{
		{[]kernels.PlanStep{drain(1), drain(1), drain(1), wait, drain(0)}, []uint32{3<<sh | 1, 1, 1, 0, 0}},
		{[]kernels.PlanStep{put(64), put(64), put(128), put(128), put(128)}, []uint32{2, 0, 3, 0, 0}},
		{[]kernels.PlanStep{put(64), drain(0), drain(0)}, []uint32{0, 2 << sh, 0}},
		{append(make([]kernels.PlanStep, 0, 10), drain(0), drain(0), drain(0), drain(0), drain(0), drain(0), drain(0), drain(0), drain(0), drain(0)),
			[]uint32{8 << sh, 0, 0, 0, 0, 0, 0, 0, 2 << sh, 0}},
	} {
		groupLines(tc.steps)
		got := make([]uint32, len(tc.steps))
		for i, s := range tc.steps {
			got[i] = s.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("counts %v, want %v", got, tc.want)
		}
	}
}

// Wide copies in a row of one source and size form a group (up to
// kernels.PlanLineGroupMax, the length << LineGroupShift in the first's
// Count); a small copy, another source or size, a copy heading a chain,
// or another step ends a run.
func TestGroupCopies(t *testing.T) {
	// Each copy to a place of its own.
	places := uint64(1 << 20)
	cp := func(src, n uint64, count uint32) kernels.PlanStep {
		places += 1 << 16
		return kernels.PlanStep{Kind: kernels.StepCopy, Src: cuda.DevicePtr(src), Dst: cuda.DevicePtr(places), N: n, Count: count}
	}
	cpTo := func(src, dst, n uint64) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepCopy, Src: cuda.DevicePtr(src), Dst: cuda.DevicePtr(dst), N: n}
	}
	const w = 4096 // wide
	add := kernels.PlanStep{Kind: kernels.StepAdd}
	sh := kernels.LineGroupShift
	nine := make([]kernels.PlanStep, 9)
	for i := range nine {
		nine[i] = cp(64, w, 0)
	}
	for _, tc := range []struct {
		steps []kernels.PlanStep
		want  []uint32
	}{
		// The rank's own copy and three puts of one chunk, their signals.
		{[]kernels.PlanStep{cp(64, w, 0), cp(64, w, 0), cp(64, w, 0), cp(64, w, 0), add, add, add}, []uint32{4 << sh, 0, 0, 0, 0, 0, 0}},
		{[]kernels.PlanStep{cp(64, w, 0), cp(128, w, 0), cp(128, w, 0)}, []uint32{0, 2 << sh, 0}},
		{[]kernels.PlanStep{cp(64, w, 0), cp(64, 2*w, 0), cp(64, 2*w, 0)}, []uint32{0, 2 << sh, 0}},
		// Small copies (thread 0's) stay alone.
		{[]kernels.PlanStep{cp(64, 16, 0), cp(64, 16, 0)}, []uint32{0, 0}},
		// A copy heading a chain keeps its count, and ends a run.
		{[]kernels.PlanStep{cp(64, w, 0), cp(64, w, 3), cp(64, w, 0), cp(64, w, 0)}, []uint32{0, 3, 2 << sh, 0}},
		{[]kernels.PlanStep{cp(64, w, 0), add, cp(64, w, 0)}, []uint32{0, 0, 0}},
		{nine, []uint32{8 << sh, 0, 0, 0, 0, 0, 0, 0, 0}},
		// A place that overlaps an earlier one's, or the source, ends a run.
		{[]kernels.PlanStep{cpTo(64, 8192, w), cpTo(64, 8192+w/2, w), cpTo(64, 16384, w)}, []uint32{0, 2 << sh, 0}},
		{[]kernels.PlanStep{cpTo(64, 8192, w), cpTo(64, 64+w/2, w)}, []uint32{0, 0}},
	} {
		groupCopies(tc.steps)
		got := make([]uint32, len(tc.steps))
		for i, s := range tc.steps {
			got[i] = s.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("counts %v, want %v", got, tc.want)
		}
	}
}

// Waits in a row form a group (up to kernels.PlanLineGroupMax, the length
// << WaitGroupShift above each wait's count of slots in the first's
// Count); any other step ends a run.
func TestGroupWaits(t *testing.T) {
	wait := func(slots uint32) kernels.PlanStep {
		return kernels.PlanStep{Kind: kernels.StepWait, Count: slots, N: 8, Cmp: kernels.CmpGE}
	}
	eq := kernels.PlanStep{Kind: kernels.StepWait, Count: 1, N: 8, Cmp: kernels.CmpEQ}
	gt := kernels.PlanStep{Kind: kernels.StepWait, Count: 1, N: 8, Cmp: kernels.CmpGT}
	add := kernels.PlanStep{Kind: kernels.StepAdd}
	sh := kernels.WaitGroupShift
	nine := make([]kernels.PlanStep, 9)
	for i := range nine {
		nine[i] = wait(1)
	}
	for _, tc := range []struct {
		steps []kernels.PlanStep
		want  []uint32
	}{
		{[]kernels.PlanStep{add, wait(1), wait(1), wait(1), add}, []uint32{0, 3<<sh | 1, 1, 1, 0}},
		{[]kernels.PlanStep{wait(3), wait(1), add, wait(2)}, []uint32{2<<sh | 3, 1, 0, 2}},
		{nine, []uint32{8<<sh | 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		// A wait for equality may hold and stop holding: it stays alone.
		{[]kernels.PlanStep{wait(1), eq, gt, wait(1)}, []uint32{1, 1, 2<<sh | 1, 1}},
	} {
		groupWaits(tc.steps)
		got := make([]uint32, len(tc.steps))
		for i, s := range tc.steps {
			got[i] = s.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("counts %v, want %v", got, tc.want)
		}
		for _, s := range tc.steps {
			if s.Kind == kernels.StepWait && s.Count&kernels.WaitSlotsMask == 0 {
				t.Errorf("a wait lost its count of slots: %#x", s.Count)
			}
		}
	}
}

// In stream and graph mode a chunk put to several peers sends its copies
// first and their signals after; a second copy to a peer of the run ends
// it, a moving step keeps its place, and nothing crosses a wait.
func TestFanOutReleases(t *testing.T) {
	cp := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepCopy, Op: op, N: 1 << 20} }
	sig := func(op uint32) kernels.PlanStep { return kernels.PlanStep{Kind: kernels.StepAdd, Op: op} }
	wait := kernels.PlanStep{Kind: kernels.StepWait, Op: 99}
	peer := map[uint32]int{1: 1, 2: 2, 3: 3, 4: 1, 5: 2}
	peerOf := func(s kernels.PlanStep) int { return peer[s.Op] }
	ops := func(steps []kernels.PlanStep) []uint32 {
		var out []uint32
		for _, s := range steps {
			out = append(out, s.Op*10+uint32(s.Kind))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		in, want []kernels.PlanStep
		moving   map[int]bool
	}{
		{"three peers", []kernels.PlanStep{cp(1), sig(1), cp(2), sig(2), cp(3), sig(3), wait},
			[]kernels.PlanStep{cp(1), cp(2), cp(3), sig(1), sig(2), sig(3), wait}, nil},
		{"pieces to one peer", []kernels.PlanStep{cp(1), sig(1), cp(4), sig(4)},
			[]kernels.PlanStep{cp(1), sig(1), cp(4), sig(4)}, nil},
		{"two rounds of two peers", []kernels.PlanStep{cp(1), sig(1), cp(2), sig(2), cp(4), sig(4), cp(5), sig(5)},
			[]kernels.PlanStep{cp(1), cp(2), sig(1), sig(2), cp(4), cp(5), sig(4), sig(5)}, nil},
		{"a wait between", []kernels.PlanStep{cp(1), sig(1), wait, cp(2), sig(2)},
			[]kernels.PlanStep{cp(1), sig(1), wait, cp(2), sig(2)}, nil},
		{"a moving signal", []kernels.PlanStep{cp(1), sig(1), cp(2), sig(2)},
			[]kernels.PlanStep{cp(1), sig(1), cp(2), sig(2)}, map[int]bool{1: true}},
	} {
		steps := append([]kernels.PlanStep(nil), c.in...)
		fanOutReleases(steps, c.moving, peerOf)
		if !reflect.DeepEqual(ops(steps), ops(c.want)) {
			t.Errorf("%s: %v, want %v", c.name, ops(steps), ops(c.want))
		}
	}
}
