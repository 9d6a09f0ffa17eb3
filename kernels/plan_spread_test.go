package kernels

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// PlanSpreadFor gives a block for every perBlock bytes of the widest step,
// at least two or else one, at most most and PlanSpreadMax; one to plans
// whose widest step is below PlanSpreadMin, with line steps or more than
// PlanCache steps.
func TestPlanSpreadFor(t *testing.T) {
	many := make([]PlanStep, PlanCache+1)
	many[0] = PlanStep{Kind: StepCopy, N: 1 << 20}
	for _, tt := range []struct {
		steps []PlanStep
		most  uint32
		want  uint32
	}{
		{[]PlanStep{{Kind: StepCopy, N: 8192}}, 8, 1},
		{[]PlanStep{{Kind: StepCopy, N: PlanSpreadMin - 1}}, 8, 1},
		{[]PlanStep{{Kind: StepCopy, N: PlanSpreadMin}}, 8, 8},
		{[]PlanStep{{Kind: StepCopy, N: PlanSpreadMin}}, 4, 4},
		{[]PlanStep{{Kind: StepReduce, N: 65536}, {Kind: StepWait}}, 8, 8},
		{[]PlanStep{{Kind: StepReduce, N: 65536}}, 4, 4},
		{[]PlanStep{{Kind: StepFillByte, N: 70000}}, 16, 9},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 30}}, 64, PlanSpreadMax},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}}, 1, 1},
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}, {Kind: StepLinePut, N: 64}}, 8, 1},
		{many, 8, 1},
	} {
		if got := PlanSpreadFor(tt.steps, tt.most, 8192); got != tt.want {
			t.Errorf("PlanSpreadFor(%d steps, widest %d, most %d) = %d, want %d", len(tt.steps), tt.steps[0].N, tt.most, got, tt.want)
		}
	}
	if got := PlanSpreadThreads([]PlanStep{{Kind: StepCopy, N: PlanSpreadMin}}, 8); got != PlanSmallThreads {
		t.Errorf("threads for 8 KiB a block: %d, want %d", got, PlanSmallThreads)
	}
	if got := PlanSpreadThreads([]PlanStep{{Kind: StepCopy, N: 256 << 10}}, 8); got != PlanMidThreads {
		t.Errorf("threads for 32 KiB a block: %d, want %d", got, PlanMidThreads)
	}
}

// gridsOf returns the indices of SpreadSteps' output that are grid steps.
func gridsOf(t *testing.T, steps []PlanStep, blocks, threads uint32) []int {
	t.Helper()
	out, at, ok := SpreadSteps(steps, blocks, threads)
	if !ok {
		t.Fatalf("SpreadSteps: %d steps, more than %d", len(out), PlanCache)
	}
	var g []int
	for i, s := range out {
		if s.Kind == StepGrid {
			g = append(g, i)
		}
	}
	for i, j := range at {
		if out[j] != steps[i] {
			t.Fatalf("step %d went to %d, which is %+v", i, j, out[j])
		}
	}
	return g
}

// SpreadSteps puts a grid step only before a step that may touch another
// block's bytes since the last one, the plan wrapping around (a clash
// between two steps of a replay is one between the second and the first of
// the next, so most cases take two; indices are those of the output).
func TestSpreadSteps(t *testing.T) {
	const A, B, C, S = 0x10000, 0x40000, 0x80000, 0xc0000 // turn: 16 * 2 * 128 = 4 KiB
	add := ReduceStepValue(F32, Sum)
	cp := func(dst, src, n uint64) PlanStep {
		return PlanStep{Kind: StepCopy, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: n}
	}
	red := func(dst, src, n uint64) PlanStep {
		return PlanStep{Kind: StepReduce, Dst: cuda.DevicePtr(dst), Src: cuda.DevicePtr(src), N: n, Value: add}
	}
	wait := PlanStep{Kind: StepWait, Dst: S, Count: 1, N: 8}
	for _, tt := range []struct {
		name  string
		steps []PlanStep
		want  []int
	}{
		{"same words", []PlanStep{cp(B, A, 65536), red(B, C, 65536), cp(A, B, 65536)}, nil},
		{"a whole turn apart", []PlanStep{cp(B, A, 65536), red(B+4096, C, 32768)}, nil},
		{"not a turn apart", []PlanStep{cp(B, A, 65536), red(B+2048, C, 32768)}, []int{0, 2}},
		{"unaligned size", []PlanStep{cp(B, A, 65530), red(B, C, 65536)}, []int{0, 2}},
		{"reads only", []PlanStep{cp(B, A, 65536), cp(C, A+16, 4096)}, nil},
		{"a fill", []PlanStep{{Kind: StepFillByte, Dst: A, N: 65536}, cp(B, A, 65536)}, []int{0, 2}},
		{"block 0's small copy", []PlanStep{cp(A, C, 64), red(B, A, 65536)}, []int{0, 2}},
		{"block 0's small copies", []PlanStep{cp(A, C, 64), cp(A+64, A, 64)}, nil},
		{"wrapping", []PlanStep{red(C, A+16, 4096), cp(A, B, 65536), wait}, []int{0, 2}},
		{"a store, then a wait on it", []PlanStep{{Kind: StepStore, Dst: S}, wait}, []int{0, 2}},
		{"waits and remote signals", []PlanStep{cp(B, A, 65536), {Kind: StepAdd, Dst: S + 64}, wait, red(A, B, 65536)}, nil},
	} {
		got := gridsOf(t, tt.steps, 2, 128)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: grid steps at %v, want %v", tt.name, got, tt.want)
		}
	}
	many := make([]PlanStep, PlanCache)
	for i := range many {
		many[i] = PlanStep{Kind: StepFillByte, Dst: A, N: 65536}
	}
	if _, _, ok := SpreadSteps(many, 2, 128); ok {
		t.Error("a spread of more than PlanCache steps was ok")
	}
}

// arrivalsZero fails unless a spread plan's job area is zero again (every
// launch leaves it so).
func arrivalsZero(t *testing.T, d *cuda.Driver, job cuda.DevicePtr, what string) {
	t.Helper()
	b := read(t, d, job, 8*planSpreadWords)
	for i := 0; i < planSpreadWords; i++ {
		if v := u64at(b, 8*i); v != 0 {
			t.Fatalf("%s: job area word %d is %d, want 0", what, i, v)
		}
	}
}

// A spread plan runs wideSteps' every wide kind (with the grid steps
// SpreadSteps puts in) to the same bytes as one block, in launch after
// launch, on 2, 3 and 8 blocks.
func TestPlanSpread(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	c := newCtl(t, d)
	const iters = 20
	for _, blocks := range []uint32{2, 3, 8} {
		mem, job := zeroed(t, d, hSize), zeroed(t, d, PlanJobSize)
		ones := make([]byte, hN)
		for i := 0; i < hN/4; i++ {
			binary.LittleEndian.PutUint32(ones[4*i:], 1)
		}
		must(t, d.MemcpyHtoD(mem.Add(hD), ones))
		threads := PlanSpreadThreads(wideSteps(mem), blocks)
		steps, _, ok := SpreadSteps(wideSteps(mem), blocks, threads)
		if !ok {
			t.Fatal("wideSteps do not spread")
		}
		table := alloc(t, d, uint64(len(steps))*PlanStepSize)
		must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
		must(t, d.DefaultStream().Synchronize())
		p := uint32(len(steps))
		for l := uint64(0); l < 2; l++ {
			must(t, k.Plan(s, PlanSpec{Steps: table, Period: p, Count: uint64(p) * iters, Rep0: l * iters,
				Timeout: 5 * time.Second, Abort: c.abortDev(), Record: c.recordDev(), Threads: threads, Blocks: blocks, Job: job,
				Spread: true}))
		}
		must(t, s.Synchronize())
		must(t, c.check(true))
		checkWide(t, read(t, d, mem, hSize), 2*iters)
		arrivalsZero(t, d, job, "after two launches")
	}
}

// exchangeSide is one side of TestPlanSpreadExchange (u32 words): bump
// its source by one, wait until the peer took the last one (ack), put it
// into the peer's recv and signal, wait for the peer's, add it to sum and
// say so.
func exchangeSide(mem, peerRecv, flag, peerFlag, ack, peerAck cuda.DevicePtr, n uint64) []PlanStep {
	const src, recv, sum, ones = 0, 1 << 20, 2 << 20, 3 << 20
	add := ReduceStepValue(U32, Sum)
	return []PlanStep{
		{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: n, Value: add},
		{Kind: StepWait, Dst: ack, Count: 1, N: 8, Cmp: CmpGE, Value: 0, Step: 1},
		{Kind: StepCopy, Dst: peerRecv, Src: mem.Add(src), N: n},
		{Kind: StepAdd, Dst: peerFlag, Value: 1},
		{Kind: StepWait, Dst: flag, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
		{Kind: StepReduce, Dst: mem.Add(sum), Src: mem.Add(recv), N: n, Value: add},
		{Kind: StepAdd, Dst: peerAck, Value: 1},
	}
}

// Two spread plans on two streams trade 64 KiB puts with their signals,
// replay after replay, each adding what it got: every block's share of a
// put lands before block 0 signals it. Then a spread plan whose wait
// nobody meets times out, naming the step, with every block gone and the
// job area zero.
func TestPlanSpreadExchange(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	const n, iters, size = 65536, 300, 4 << 20
	words := n / 4
	init := make([]byte, size)
	for i := 0; i < words; i++ {
		binary.LittleEndian.PutUint32(init[4*i:], uint32(7*i))
		binary.LittleEndian.PutUint32(init[3<<20+4*i:], 1)
	}
	for _, blocks := range []uint32{2, 4, 8} {
		a, b, flags := zeroed(t, d, size), zeroed(t, d, size), zeroed(t, d, 512)
		must(t, d.MemcpyHtoD(a, init))
		must(t, d.MemcpyHtoD(b, init))
		threads := PlanSpreadThreads([]PlanStep{{Kind: StepCopy, N: n}}, blocks)
		pa, _, okA := SpreadSteps(exchangeSide(a, b.Add(1<<20), flags, flags.Add(128), flags.Add(256), flags.Add(384), n), blocks, threads)
		pb, _, okB := SpreadSteps(exchangeSide(b, a.Add(1<<20), flags.Add(128), flags, flags.Add(384), flags.Add(256), n), blocks, threads)
		if !okA || !okB || len(pa) != 7 {
			t.Fatalf("exchange spread into %d steps (%v, %v), want 7 (no grid step)", len(pa), okA, okB)
		}
		ta, tb := alloc(t, d, 7*PlanStepSize), alloc(t, d, 7*PlanStepSize)
		must(t, d.MemcpyHtoD(ta, EncodePlan(pa)))
		must(t, d.MemcpyHtoD(tb, EncodePlan(pb)))
		ja, jb := zeroed(t, d, PlanJobSize), zeroed(t, d, PlanJobSize)
		spec := func(tab, job cuda.DevicePtr) PlanSpec {
			return PlanSpec{Steps: tab, Period: 7, Count: 7 * iters, Timeout: 10 * time.Second, Record: c.recordDev(),
				GPUScope: true, Threads: threads, Blocks: blocks, Job: job, Spread: true}
		}
		must(t, k.Plan(s1, spec(tb, jb)))
		dt := timeIt(t, d, s0, func() { must(t, k.Plan(s0, spec(ta, ja))) })
		must(t, s1.Synchronize())
		must(t, c.check(true))
		for name, mem := range map[string]cuda.DevicePtr{"a": a, "b": b} {
			got := read(t, d, mem.Add(2<<20), n)
			for i := 0; i < words; i++ {
				want := uint32(iters*7*i + iters*(iters+1)/2)
				if g := binary.LittleEndian.Uint32(got[4*i:]); g != want {
					t.Fatalf("%d blocks: %s's sum word %d = %d, want %d", blocks, name, i, g, want)
				}
			}
		}
		arrivalsZero(t, d, ja, "after the exchange")
		t.Logf("MEASURED spread exchange (%d bytes, %d blocks of %d): %.0f ns per round trip", n, blocks, threads, float64(dt.Nanoseconds())/iters)
	}
	// A wait nobody meets, between two spread copies.
	mem, slot, job := zeroed(t, d, size), zeroed(t, d, 8), zeroed(t, d, PlanJobSize)
	bad := []PlanStep{
		{Kind: StepCopy, Dst: mem.Add(1 << 20), Src: mem, N: n},
		{Kind: StepAdd, Dst: slot.Add(0), Value: 0},
		{Kind: StepWait, Dst: slot, Count: 1, N: 8, Cmp: CmpGE, Value: 1},
		{Kind: StepCopy, Dst: mem.Add(2 << 20), Src: mem, N: n},
	}
	steps, _, _ := SpreadSteps(bad, 4, PlanSmallThreads)
	tab := alloc(t, d, uint64(len(steps))*PlanStepSize)
	must(t, d.MemcpyHtoD(tab, EncodePlan(steps)))
	must(t, d.DefaultStream().Synchronize())
	t0 := time.Now()
	must(t, k.Plan(s0, PlanSpec{Steps: tab, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 50 * time.Millisecond,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 5, Threads: PlanSmallThreads, Blocks: 4, Job: job, Spread: true}))
	must(t, s0.Synchronize())
	r := c.record()
	tag, step, ok := DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 5 || steps[step].Kind != StepWait {
		t.Fatalf("record %+v (tag %d, step %d, %v), want a timeout of the wait", r, tag, step, ok)
	}
	if dt := time.Since(t0); dt > 2*time.Second {
		t.Fatalf("the timed-out spread plan returned after %v", dt)
	}
	arrivalsZero(t, d, job, "after a failed wait")
	c.clear()
}

// A wait group's first wait reads its own slots only: the group's length
// above WaitGroupShift is not a count of slots.
func TestAccessesOfGroupedWait(t *testing.T) {
	acc := accessesOf(PlanStep{Kind: StepWait, Dst: 64, N: 8, Count: 2<<WaitGroupShift | 3})
	if len(acc) != 3 || acc[2].lo != 64+16 || acc[0].write {
		t.Fatalf("accesses %+v, want 3 slot reads from 64, 8 bytes apart", acc)
	}
}
