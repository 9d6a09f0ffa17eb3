package kernels

import (
	"encoding/binary"
	"testing"

	"github.com/luacoll/luacoll/cuda"
)

// wideLayout is TestPlanSpread's memory: word areas of a u32 plan.
const (
	hA, hB, hB2, hD, hC, hE, hF, hG = 0, 256 << 10, 512<<10 + 3, 768 << 10, 1 << 20, 1280 << 10, 1536 << 10, 1792 << 10
	hN                              = 200000 // bytes of A (50,000 words), B, C, D, E
	hN2                             = 140001 // the unaligned copy
	hF1                             = 140000 // the fill
	hSize                           = 2 << 20
)

// wideSteps is a plan of every wide kind, most above 128 KiB: a fill
// of A (word i is 7 + i), its copy to B and (unaligned) to B2, a copy to
// C heading a chain that adds B and D (ones), a reduction of A into E
// (each replay adds it again), a byte fill of F and a small copy to G.
func wideSteps(mem cuda.DevicePtr) []PlanStep {
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

// checkWide checks wideSteps' results after reps replays.
func checkWide(t *testing.T, got []byte, reps uint32) {
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

// The time a replay of one local copy (and of a copy and a signal) takes
// spread over 1 to 16 blocks, from 128 KiB to 1 MiB (the numbers go to the
// log).
func TestPlanSpreadCost(t *testing.T) {
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
				ns := replayNs(t, e, s, c, PlanSpec{Steps: table, Period: p, Blocks: blocks, Job: job, Spread: true,
					Threads: PlanSpreadThreads(steps, blocks)}, reps)
				t.Logf("MEASURED spread plan, copy of %d bytes (signal after: %v), %d blocks: %.0f ns a replay", n, sig, blocks, ns)
			}
		}
	}
}
