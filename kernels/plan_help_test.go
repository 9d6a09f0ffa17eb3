package kernels

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// PlanBlocksFor gives one block to plans with no step of PlanHelpMin
// bytes, else one for every 32 KiB of the widest, at most most.
func TestPlanBlocksFor(t *testing.T) {
	for _, tt := range []struct {
		steps []PlanStep
		most  uint32
		want  uint32
	}{
		{[]PlanStep{{Kind: StepCopy, N: PlanHelpMin - 1}, {Kind: StepReduce, N: 4096}}, 8, 1},
		{[]PlanStep{{Kind: StepCopy, N: PlanHelpMin}}, 8, 4},
		{[]PlanStep{{Kind: StepCopy, N: 1024}, {Kind: StepReduce, N: 256 << 10}}, 8, 8},
		{[]PlanStep{{Kind: StepFillRand, N: 150000}}, 8, 5},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}}, 8, 8},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}}, 1, 1},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}}, 64, 32},
		// Lines and put_signals stay block 0's, whatever their size.
		{[]PlanStep{{Kind: StepLinePut, N: 1 << 20}, {Kind: StepPutSignal, N: 1 << 20}}, 8, 1},
	} {
		if got := PlanBlocksFor(tt.steps, tt.most); got != tt.want {
			t.Errorf("PlanBlocksFor(%+v, %d) = %d, want %d", tt.steps, tt.most, got, tt.want)
		}
	}
}

// helpLayout is TestPlanHelpers' memory: word areas of a u32 plan.
const (
	hA, hB, hB2, hD, hC, hE, hF, hG = 0, 256 << 10, 512<<10 + 3, 768 << 10, 1 << 20, 1280 << 10, 1536 << 10, 1792 << 10
	hN                              = 200000 // bytes of A (50,000 words), B, C, D, E
	hN2                             = 140001 // the unaligned copy
	hF1                             = 140000 // the fill
	hSize                           = 2 << 20
)

// helpSteps is a plan of every wide kind, most above PlanHelpMin: a fill
// of A (word i is 7 + i), its copy to B and (unaligned) to B2, a copy to
// C heading a chain that adds B and D (ones), a reduction of A into E
// (each replay adds it again), a byte fill of F and a small copy to G.
func helpSteps(mem cuda.DevicePtr) []PlanStep {
	add := ReduceStepValue(U32, Sum)
	return []PlanStep{
		{Kind: StepFillIota, Dst: mem.Add(hA), N: hN, Value: 7},
		{Kind: StepCopy, Dst: mem.Add(hB), Src: mem.Add(hA), N: hN},
		{Kind: StepCopy, Dst: mem.Add(hB2), Src: mem.Add(hA), N: hN2},
		{Kind: StepCopy, Dst: mem.Add(hC), Src: mem.Add(hA), N: hN, Count: 2},
		{Kind: StepReduce, Dst: mem.Add(hC), Src: mem.Add(hB), N: hN, Value: add},
		{Kind: StepReduce, Dst: mem.Add(hC), Src: mem.Add(hD), N: hN, Value: add},
		{Kind: StepReduce, Dst: mem.Add(hE), Src: mem.Add(hA), N: hN, Value: add},
		{Kind: StepFillByte, Dst: mem.Add(hF), N: hF1, Value: 0x5a},
		{Kind: StepCopy, Dst: mem.Add(hG), Src: mem.Add(hA), N: 1024},
	}
}

// checkHelped checks helpSteps' results after reps replays.
func checkHelped(t *testing.T, got []byte, reps uint32) {
	t.Helper()
	w := func(at, i int) uint32 { return binary.LittleEndian.Uint32(got[at+4*i:]) }
	for i := 0; i < hN/4; i++ {
		a := uint32(7 + i)
		if w(hA, i) != a || w(hB, i) != a || w(hC, i) != 2*a+1 || w(hE, i) != reps*a {
			t.Fatalf("word %d: A %d B %d C %d E %d, want %d %d %d %d", i, w(hA, i), w(hB, i), w(hC, i), w(hE, i), a, a, 2*a+1, reps*a)
		}
	}
	for i := 0; i < hN2; i++ {
		if got[hB2+i] != got[hA+i] {
			t.Fatalf("unaligned copy: byte %d is %d, want %d", i, got[hB2+i], got[hA+i])
		}
	}
	for i := 0; i < hF1; i++ {
		if got[hF+i] != 0x5a {
			t.Fatalf("fill: byte %d is %#x", i, got[hF+i])
		}
	}
	for i := 0; i < 1024; i++ {
		if got[hG+i] != got[hA+i] {
			t.Fatalf("small copy: byte %d is %d, want %d", i, got[hG+i], got[hA+i])
		}
	}
}

// jobZero fails unless the job area's seq and done are zero (every
// launch leaves them so).
func jobZero(t *testing.T, d *cuda.Driver, job cuda.DevicePtr, what string) {
	t.Helper()
	b := read(t, d, job, PlanJobSize)
	if seq, done := u64at(b, 0), u64at(b, 128); seq != 0 || done != 0 {
		t.Fatalf("%s: job area seq %d, done %d, want 0 and 0", what, seq, done)
	}
}

// Helper blocks share the wide steps: every kind, aligned or not, a chain,
// a reduction into the same bytes replay after replay, in launch after
// launch (the job area zero again after each), on 1 to 8 blocks.
func TestPlanHelpers(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	c := newCtl(t, d)
	if err := k.Plan(s, PlanSpec{Steps: 1, Period: 1, Count: 1, Blocks: 2}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("2 blocks with no job area: %v, want ErrBadSpec", err)
	}
	const iters = 20
	for _, blocks := range []uint32{1, 2, 3, 8} {
		for _, threads := range []uint32{0, PlanSmallThreads} {
			mem, job := zeroed(t, d, hSize), zeroed(t, d, PlanJobSize)
			ones := make([]byte, hN)
			for i := 0; i < hN/4; i++ {
				binary.LittleEndian.PutUint32(ones[4*i:], 1)
			}
			must(t, d.MemcpyHtoD(mem.Add(hD), ones))
			steps := helpSteps(mem)
			table := alloc(t, d, uint64(len(steps))*PlanStepSize)
			must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
			must(t, d.DefaultStream().Synchronize())
			p := uint32(len(steps))
			for l := uint64(0); l < 2; l++ {
				must(t, k.Plan(s, PlanSpec{Steps: table, Period: p, Count: uint64(p) * iters, Rep0: l * iters,
					Timeout: 5 * time.Second, Abort: c.abortDev(), Record: c.recordDev(), Threads: threads, Blocks: blocks, Job: job}))
			}
			must(t, s.Synchronize())
			must(t, c.check(true))
			checkHelped(t, read(t, d, mem, hSize), 2*iters)
			jobZero(t, d, job, "after two launches")
		}
	}
}

// A failed wait among helped steps ends the launch with the helpers
// released (the job area zero), and so does a launch that finds the
// record failed already; a dead job area (a helper that never answered)
// fails the next launch at once.
func TestPlanHelpersFail(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	c := newCtl(t, d)
	mem, job, slot := zeroed(t, d, hSize), zeroed(t, d, PlanJobSize), zeroed(t, d, 8)
	steps := []PlanStep{
		{Kind: StepFillByte, Dst: mem.Add(hA), N: hN, Value: 3},
		{Kind: StepWait, Dst: slot, Count: 1, N: 8, Cmp: CmpGE, Value: 1},
		{Kind: StepFillByte, Dst: mem.Add(hB), N: hN, Value: 4},
	}
	table := alloc(t, d, uint64(len(steps))*PlanStepSize)
	must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
	must(t, d.DefaultStream().Synchronize())
	spec := PlanSpec{Steps: table, Period: 3, Count: 3, Timeout: 50 * time.Millisecond, Abort: c.abortDev(),
		Record: c.recordDev(), Tag: 9, Blocks: 4, Job: job}
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	r := c.record()
	if tag, step, ok := DecodePlanFailure(r.Slot); r.Status != StatusTimeout || !ok || tag != 9 || step != 1 {
		t.Fatalf("record %+v (tag %d, step %d, %v), want a timeout at step 1", r, tag, step, ok)
	}
	got := read(t, d, mem, hSize)
	if got[hA] != 3 || got[hA+hN-1] != 3 || got[hB] != 0 || got[hB+hN-1] != 0 {
		t.Fatalf("A ends %d..%d, B %d..%d: want the fill before the wait and none after", got[hA], got[hA+hN-1], got[hB], got[hB+hN-1])
	}
	jobZero(t, d, job, "after a failed wait")
	// The record still holds the failure: the next launch runs nothing.
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	jobZero(t, d, job, "after a launch on a failed record")
	c.clear()
	// A dead area fails the launch at once, naming no step of the plan.
	dead := make([]byte, 8)
	binary.LittleEndian.PutUint64(dead, ^uint64(0))
	must(t, d.MemcpyHtoD(job, dead))
	must(t, d.DefaultStream().Synchronize())
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	r = c.record()
	if tag, step, ok := DecodePlanFailure(r.Slot); r.Status != StatusTimeout || !ok || tag != 9 || step != 3 {
		t.Fatalf("dead job area: record %+v (tag %d, step %d, %v), want a timeout between replays (step 3)", r, tag, step, ok)
	}
	if got := read(t, d, mem, hSize); got[hB] != 0 {
		t.Fatal("a launch on a dead job area ran its steps")
	}
	c.clear()
}

// The time a replay of one local copy (and of a copy and a signal) takes
// on 1 to 16 blocks, from 128 KiB to 1 MiB: what the helpers' hand-over
// costs against what they move.
func TestPlanHelpCost(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	c := newCtl(t, d)
	const reps = 1000
	mem, flag := alloc(t, d, 4<<20), zeroed(t, d, 8)
	table := alloc(t, d, 2*PlanStepSize)
	for _, n := range []uint64{128 << 10, 256 << 10, 1 << 20} {
		for _, sig := range []bool{false, true} {
			steps := []PlanStep{{Kind: StepCopy, Dst: mem.Add(2 << 20), Src: mem, N: n}}
			if sig {
				steps = append(steps, PlanStep{Kind: StepAdd, Dst: flag, Value: 1})
			}
			must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
			must(t, d.DefaultStream().Synchronize())
			job := zeroed(t, d, PlanJobSize)
			p := uint32(len(steps))
			for _, blocks := range []uint32{1, 2, 4, 8, 16} {
				ns := replayNs(t, e, s, c, PlanSpec{Steps: table, Period: p, Blocks: blocks, Job: job}, reps)
				t.Logf("MEASURED plan helpers, copy of %d bytes (signal after: %v), %d blocks: %.0f ns a replay", n, sig, blocks, ns)
			}
		}
	}
}
