package kernels

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// PlanSpreadFor gives a block for every perBlock bytes of the widest step
// (a group of line steps: 16 bytes a line of every member), at least two
// or else one, at most most and PlanSpreadMax; one to plans whose widest
// step is below PlanSpreadMin (PlanSpreadMinPair in a plan of two ranks) or
// with more than PlanCache steps.
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
		{[]PlanStep{{Kind: StepReduce, N: 1 << 20}, {Kind: StepLinePut, N: 64}}, 8, 8},
		// Three drains of 16 KiB, grouped: 3 * 2048 lines of 16 bytes.
		{[]PlanStep{{Kind: StepLineWait, N: 16384, Count: 3 << LineGroupShift}, {Kind: StepLineWait, N: 16384},
			{Kind: StepLineWait, N: 16384}}, 8, 8},
		// One drain of 16 KiB: 32 KiB of lines, below PlanSpreadMin.
		{[]PlanStep{{Kind: StepLineWait, N: 16384}}, 8, 1},
		// A group of three line puts of 12 KiB: 72 KiB of lines.
		{[]PlanStep{{Kind: StepLinePut, N: 12288, Count: 3}, {Kind: StepLinePut, N: 12288}, {Kind: StepLinePut, N: 12288}}, 16, 9},
		{many, 8, 1},
	} {
		if got := PlanSpreadFor(tt.steps, tt.most, 8192, PlanSpreadMinFor(4)); got != tt.want {
			t.Errorf("PlanSpreadFor(%d steps, widest %d, most %d) = %d, want %d", len(tt.steps), tt.steps[0].N, tt.most, got, tt.want)
		}
	}
	// Two ranks: 64 KiB steps stay on one block, 128 KiB ones spread.
	for _, tt := range []struct {
		n    uint64
		want uint32
	}{{PlanSpreadMin, 1}, {PlanSpreadMinPair - 16, 1}, {PlanSpreadMinPair, 8}} {
		if got := PlanSpreadFor([]PlanStep{{Kind: StepCopy, N: tt.n}}, 8, 8192, PlanSpreadMinFor(2)); got != tt.want {
			t.Errorf("two ranks, widest %d: %d blocks, want %d", tt.n, got, tt.want)
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
	d, k, s, c := kernelsOn(t)
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
		table := uploadPlan(t, d, steps)
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
		ta, tb := uploadPlan(t, d, pa), uploadPlan(t, d, pb)
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
	tab := uploadPlan(t, d, steps)
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

// Line steps in a spread plan: a wide drain's payload is cut by lines, and
// every block meets after it, so a reduction of it right after needs no
// grid step, but the next replay's drain, which writes what the reduction
// read, does; a line alone is block 0's, and so needs one before a wide
// step reads its payload; the members of a group of drains are the
// head's to drain, cut by lines.
func TestSpreadStepsLines(t *testing.T) {
	drain := PlanStep{Kind: StepLineWait, Dst: 1 << 20, Src: 0, N: 16384, Aux: 2 << 20, Value: 1, Step: 1}
	one := PlanStep{Kind: StepLineWait, Dst: 1 << 20, Src: 0, N: 8, Aux: 2 << 20, Value: 1, Step: 1}
	cp := PlanStep{Kind: StepCopy, Dst: 65536, Src: 0, N: 16384}
	red := PlanStep{Kind: StepReduce, Dst: 65536, Src: 0, N: 16384, Value: ReduceStepValue(F32, Sum)}
	out, _, ok := SpreadSteps([]PlanStep{drain, red}, 4, 128)
	if want := []StepKind{StepGrid, StepLineWait, StepReduce}; !ok || fmt.Sprint(kinds(out)) != fmt.Sprint(want) {
		t.Fatalf("drain then reduction: %v, want %v", kinds(out), want)
	}
	// A group of two drains, the second of 8 bytes: the head drains it
	// over the grid, so a small copy of its payload (block 0's) after the
	// group is safe only because every block met after the group; a wide
	// copy of the first's payload right after needs no grid step either.
	head := drain
	head.N, head.Count = 2048, 2<<LineGroupShift
	member := one
	member.Dst, member.Src, member.Aux = 1<<20+4096, 8192, 2<<20+128
	small := PlanStep{Kind: StepCopy, Dst: 3 << 20, Src: 8192, N: 8}
	out, _, _ = SpreadSteps([]PlanStep{head, member, small, cp}, 4, 128)
	if want := []StepKind{StepGrid, StepLineWait, StepLineWait, StepCopy, StepCopy}; fmt.Sprint(kinds(out)) != fmt.Sprint(want) {
		t.Fatalf("a group of drains, then copies of their payloads: %v, want %v", kinds(out), want)
	}
	if acc := accessesFor(member, true); acc[1].who != byOther {
		t.Fatalf("a group member's payload: %+v, want cut by lines over the grid", acc[1])
	}
	if out, _, _ = SpreadSteps([]PlanStep{one, cp}, 4, 128); len(out) < 3 || out[len(out)-2].Kind != StepGrid {
		t.Fatalf("a line alone then a wide copy of its payload: %v", kinds(out))
	}
	// A line put is a signal: every block meets before it (before a
	// group's head only).
	put := PlanStep{Kind: StepLinePut, Dst: 3 << 20, Src: 0, N: 16384, Value: 1, Step: 1}
	if out, _, _ = SpreadSteps([]PlanStep{put, put}, 4, 128); fmt.Sprint(kinds(out)) != fmt.Sprint([]StepKind{StepGrid, StepLinePut, StepGrid, StepLinePut}) {
		t.Fatalf("two line puts: %v", kinds(out))
	}
	group := put
	group.Count = 2
	if out, _, _ = SpreadSteps([]PlanStep{group, put}, 4, 128); fmt.Sprint(kinds(out)) != fmt.Sprint([]StepKind{StepGrid, StepLinePut, StepLinePut}) {
		t.Fatalf("a group of two line puts: %v", kinds(out))
	}
}

func kinds(steps []PlanStep) []StepKind {
	var k []StepKind
	for _, s := range steps {
		k = append(k, s.Kind)
	}
	return k
}

// lineSide is one side of a line exchange: add one to the source, wait
// until the peer drained the last replay's lines, send the source as lines
// into the peer's line area, drain its own line area into recv, add recv
// into sum, and tell the peer.
func lineSide(mem, lines, peerLines, ack, peerAck, slot cuda.DevicePtr, n uint64) []PlanStep {
	const src, recv, sum, ones = 0, 1 << 20, 2 << 20, 3 << 20
	add := ReduceStepValue(U32, Sum)
	return []PlanStep{
		{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: n, Value: add},
		{Kind: StepWait, Dst: ack, Count: 1, N: 8, Cmp: CmpGE, Value: 0, Step: 1},
		{Kind: StepLinePut, Dst: peerLines, Src: mem.Add(src), N: n, Value: 1, Step: 1},
		{Kind: StepLineWait, Dst: lines, Src: mem.Add(recv), N: n, Value: 1, Step: 1, Cmp: 1, Aux: slot},
		{Kind: StepReduce, Dst: mem.Add(sum), Src: mem.Add(recv), N: n, Value: add},
		{Kind: StepAdd, Dst: peerAck, Value: 1},
	}
}

// Two spread plans on two streams trade lines (8 bytes, a line alone,
// thread 0's; 64 bytes and 16 KiB, every block its share), replay after
// replay, each adding what it got; every drain adds one to its slot once.
func TestPlanSpreadLines(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	const iters, size = 300, 4 << 20
	for _, n := range []uint64{8, 64, 16384} {
		words := int(n / 4)
		init := make([]byte, size)
		for i := 0; i < words; i++ {
			binary.LittleEndian.PutUint32(init[4*i:], uint32(7*i))
			binary.LittleEndian.PutUint32(init[3<<20+4*i:], 1)
		}
		for _, blocks := range []uint32{2, 4} {
			a, b, la, lb, flags := zeroed(t, d, size), zeroed(t, d, size), zeroed(t, d, 65536), zeroed(t, d, 65536), zeroed(t, d, 512)
			must(t, d.MemcpyHtoD(a, init))
			must(t, d.MemcpyHtoD(b, init))
			threads := uint32(PlanSmallThreads)
			pa, _, okA := SpreadSteps(lineSide(a, la, lb, flags, flags.Add(128), flags.Add(256), n), blocks, threads)
			pb, _, okB := SpreadSteps(lineSide(b, lb, la, flags.Add(128), flags, flags.Add(384), n), blocks, threads)
			if !okA || !okB || len(pa) != len(pb) {
				t.Fatalf("%d bytes, %d blocks: spread into %d and %d steps (%v, %v)", n, blocks, len(pa), len(pb), okA, okB)
			}
			p := uint32(len(pa))
			ta, tb := uploadPlan(t, d, pa), uploadPlan(t, d, pb)
			ja, jb := zeroed(t, d, PlanJobSize), zeroed(t, d, PlanJobSize)
			spec := func(tab, job cuda.DevicePtr) PlanSpec {
				return PlanSpec{Steps: tab, Period: p, Count: uint64(p) * iters, Timeout: 10 * time.Second, Record: c.recordDev(),
					GPUScope: true, Threads: threads, Blocks: blocks, Job: job, Spread: true}
			}
			must(t, k.Plan(s1, spec(tb, jb)))
			must(t, k.Plan(s0, spec(ta, ja)))
			must(t, s0.Synchronize())
			must(t, s1.Synchronize())
			must(t, c.check(true))
			fl := read(t, d, flags, 512)
			for name, mem := range map[string]cuda.DevicePtr{"a": a, "b": b} {
				got := read(t, d, mem.Add(2<<20), int(n))
				for i := 0; i < words; i++ {
					want := uint32(iters*7*i + iters*(iters+1)/2)
					if g := binary.LittleEndian.Uint32(got[4*i:]); g != want {
						t.Fatalf("%d bytes, %d blocks (%v): %s's sum word %d = %d, want %d", n, blocks, kinds(pa), name, i, g, want)
					}
				}
			}
			if u64at(fl, 256) != iters || u64at(fl, 384) != iters {
				t.Fatalf("%d bytes, %d blocks: the drains added %d and %d to their slots, want %d", n, blocks, u64at(fl, 256), u64at(fl, 384), iters)
			}
			arrivalsZero(t, d, ja, "after the line exchange (a)")
			arrivalsZero(t, d, jb, "after the line exchange (b)")
		}
	}
}

// flowSide is one side of an exchange whose only flow control is its
// lines: add one to the source (64 KiB), send its first 1 KiB as lines,
// drain the peer's, copy the whole source into the peer's window (safe:
// the peer's lines of this replay left once every block of the peer got
// there, after its last reading of that window), signal, wait for the
// peer's copy, and add both into sums.
func flowSide(mem, peerMem, lines, peerLines, flag, peerFlag, slot cuda.DevicePtr) []PlanStep {
	const src, recv, bigRecv, sum, bigSum, ones = 0, 1 << 20, 1<<20 + 65536, 2 << 20, 2<<20 + 65536, 3 << 20
	add := ReduceStepValue(U32, Sum)
	return []PlanStep{
		{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: 65536, Value: add},
		{Kind: StepLinePut, Dst: peerLines, Src: mem.Add(src), N: 1024, Value: 1, Step: 1},
		{Kind: StepLineWait, Dst: lines, Src: mem.Add(recv), N: 1024, Value: 1, Step: 1, Cmp: 1, Aux: slot},
		{Kind: StepCopy, Dst: peerMem.Add(bigRecv), Src: mem.Add(src), N: 65536},
		{Kind: StepAdd, Dst: peerFlag, Value: 1},
		{Kind: StepWait, Dst: flag, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
		{Kind: StepReduce, Dst: mem.Add(bigSum), Src: mem.Add(bigRecv), N: 65536, Value: add},
		{Kind: StepReduce, Dst: mem.Add(sum), Src: mem.Add(recv), N: 1024, Value: add},
	}
}

// Two spread plans whose lines are their only flow control for a copy
// into each other's window: a block with no lines of its own must not
// copy before the peer's every block is done reading (the drain holds
// every block; the put goes once every block got there).
func TestPlanSpreadLineFlow(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	const iters, size, words = 300, 4 << 20, 65536 / 4
	init := make([]byte, size)
	for i := 0; i < words; i++ {
		binary.LittleEndian.PutUint32(init[4*i:], uint32(7*i))
		binary.LittleEndian.PutUint32(init[3<<20+4*i:], 1)
	}
	for _, blocks := range []uint32{4, 8} {
		a, b, la, lb, flags := zeroed(t, d, size), zeroed(t, d, size), zeroed(t, d, 65536), zeroed(t, d, 65536), zeroed(t, d, 512)
		must(t, d.MemcpyHtoD(a, init))
		must(t, d.MemcpyHtoD(b, init))
		threads := uint32(PlanSmallThreads)
		pa, _, okA := SpreadSteps(flowSide(a, b, la, lb, flags, flags.Add(128), flags.Add(256)), blocks, threads)
		pb, _, okB := SpreadSteps(flowSide(b, a, lb, la, flags.Add(128), flags, flags.Add(384)), blocks, threads)
		if !okA || !okB || len(pa) != len(pb) {
			t.Fatalf("%d blocks: spread into %d and %d steps", blocks, len(pa), len(pb))
		}
		p := uint32(len(pa))
		ta, tb := uploadPlan(t, d, pa), uploadPlan(t, d, pb)
		ja, jb := zeroed(t, d, PlanJobSize), zeroed(t, d, PlanJobSize)
		spec := func(tab, job cuda.DevicePtr) PlanSpec {
			return PlanSpec{Steps: tab, Period: p, Count: uint64(p) * iters, Timeout: 10 * time.Second, Record: c.recordDev(),
				GPUScope: true, Threads: threads, Blocks: blocks, Job: job, Spread: true}
		}
		must(t, k.Plan(s1, spec(tb, jb)))
		must(t, k.Plan(s0, spec(ta, ja)))
		must(t, s0.Synchronize())
		must(t, s1.Synchronize())
		must(t, c.check(true))
		for name, mem := range map[string]cuda.DevicePtr{"a": a, "b": b} {
			got := read(t, d, mem.Add(2<<20), 2*65536)
			for i := 0; i < words; i++ {
				want := uint32(iters*7*i + iters*(iters+1)/2)
				if g := binary.LittleEndian.Uint32(got[65536+4*i:]); g != want {
					t.Fatalf("%d blocks (%v): %s's copied sum word %d = %d, want %d", blocks, kinds(pa), name, i, g, want)
				}
				if i < 256 {
					if g := binary.LittleEndian.Uint32(got[4*i:]); g != want {
						t.Fatalf("%d blocks: %s's line sum word %d = %d, want %d", blocks, name, i, g, want)
					}
				}
			}
		}
		arrivalsZero(t, d, ja, "after the flow exchange (a)")
		arrivalsZero(t, d, jb, "after the flow exchange (b)")
	}
}

// A wait group's first wait reads its own slots only: the group's length
// above WaitGroupShift is not a count of slots.
func TestAccessesOfGroupedWait(t *testing.T) {
	acc := accessesFor(PlanStep{Kind: StepWait, Dst: 64, N: 8, Count: 2<<WaitGroupShift | 3}, false)
	if len(acc) != 3 || acc[2].lo != 64+16 || acc[0].write {
		t.Fatalf("accesses %+v, want 3 slot reads from 64, 8 bytes apart", acc)
	}
}
