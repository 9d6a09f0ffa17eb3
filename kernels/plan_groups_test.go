package kernels

import (
	"encoding/binary"
	"testing"
	"time"
)

// A copy group: one source copied to three places in one step, every
// replay, each place summed into its own area after; and a run whose
// second copy has another size, which the interpreter runs one by one.
// Replay r adds 1 to every word of the source first, so every area must
// hold the sum over the replays of what the source held then.
func TestPlanCopyGroups(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	const iters = 300
	const src, ones, dst, sum = 0, 8192, 16384, 32768 // dst and sum: 3 areas 4,096 + 64 bytes apart
	const gap = 4096 + 64
	add := ReduceStepValue(U32, Sum)
	for _, n := range []uint64{4096, 4100} {
		for _, broken := range []bool{false, true} {
			for _, threads := range []uint32{0, 32} {
				words := int(n / 4)
				init := make([]byte, 65536)
				for i := 0; i < words; i++ {
					binary.LittleEndian.PutUint32(init[src+4*i:], uint32(3*i+1))
					binary.LittleEndian.PutUint32(init[ones+4*i:], 1)
				}
				mem := alloc(t, d, 65536)
				must(t, d.MemcpyHtoD(mem, init))
				steps := []PlanStep{{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: n, Value: add}}
				for g := uint64(0); g < 3; g++ {
					st := PlanStep{Kind: StepCopy, Dst: mem.Add(dst + g*gap), Src: mem.Add(src), N: n}
					if g == 0 {
						st.Count = 3 << LineGroupShift
					}
					if g == 1 && broken {
						// Another size: not a group; the rest of the
						// bytes come from a copy of their own.
						st.N = n - 4
						steps = append(steps, PlanStep{Kind: StepCopy, Dst: mem.Add(dst + g*gap + n - 4), Src: mem.Add(src + n - 4), N: 4})
					}
					steps = append(steps, st)
				}
				for g := uint64(0); g < 3; g++ {
					steps = append(steps, PlanStep{Kind: StepReduce, Dst: mem.Add(sum + g*gap), Src: mem.Add(dst + g*gap), N: n, Value: add})
				}
				runReplays(t, d, k, s, c, steps, iters, threads)
				got := read(t, d, mem, 65536)
				for g := 0; g < 3; g++ {
					for i := 0; i < words; i++ {
						// Replay r (1..iters) copies 3i+1+r.
						want := uint32(iters*(3*i+1) + iters*(iters+1)/2)
						if v := binary.LittleEndian.Uint32(got[sum+g*gap+4*i:]); v != want {
							t.Fatalf("%d bytes, broken %v, threads %d: place %d's sum word %d = %d, want %d", n, broken, threads, g, i, v, want)
						}
					}
				}
			}
		}
	}
}

// A wait group: three signals, then three waits for them polled side by
// side, every replay; a block of 32 threads too. Then a group whose second
// wait nobody satisfies: it times out, and the record names that step.
func TestPlanWaitGroups(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	const iters = 500
	for _, threads := range []uint32{0, 32} {
		slots := zeroed(t, d, 3*128)
		var steps []PlanStep
		for g := uint64(0); g < 3; g++ {
			steps = append(steps, PlanStep{Kind: StepAdd, Dst: slots.Add(g * 128), Value: 1})
		}
		for g := uint64(0); g < 3; g++ {
			// Replay r waits for r + 1.
			st := PlanStep{Kind: StepWait, Dst: slots.Add(g * 128), Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1}
			if g == 0 {
				st.Count |= 3 << WaitGroupShift
			}
			steps = append(steps, st)
		}
		runReplays(t, d, k, s, c, steps, iters, threads)
		got := read(t, d, slots, 3*128)
		for g := 0; g < 3; g++ {
			if u64at(got, 128*g) != iters {
				t.Fatalf("threads %d: slot %d = %d, want %d", threads, g, u64at(got, 128*g), iters)
			}
		}
	}
	slots := zeroed(t, d, 3*128)
	steps := []PlanStep{
		{Kind: StepAdd, Dst: slots, Value: 1},
		{Kind: StepAdd, Dst: slots.Add(256), Value: 1},
		{Kind: StepWait, Dst: slots, Count: 3<<WaitGroupShift | 1, N: 8, Cmp: CmpGE, Value: 1},
		{Kind: StepWait, Dst: slots.Add(128), Count: 1, N: 8, Cmp: CmpGE, Value: 1},
		{Kind: StepWait, Dst: slots.Add(256), Count: 1, N: 8, Cmp: CmpGE, Value: 1},
	}
	table := uploadPlan(t, d, steps)
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 50 * time.Millisecond,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 7}))
	must(t, s.Synchronize())
	r := c.record()
	tag, step, ok := DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 7 || step != 3 || r.Target != 1 || r.Observed != 0 {
		t.Fatalf("record %+v (tag %d, step %d, %v): want a timeout of step 3", r, tag, step, ok)
	}
	c.clear()
	// Two waits of a group time out together: one of them writes the
	// record, whole (its step, what it saw, its target).
	slots = zeroed(t, d, 3*128)
	steps = []PlanStep{
		{Kind: StepAdd, Dst: slots, Value: 1},
		{Kind: StepWait, Dst: slots, Count: 3<<WaitGroupShift | 1, N: 8, Cmp: CmpGE, Value: 1},
		{Kind: StepWait, Dst: slots.Add(128), Count: 1, N: 8, Cmp: CmpGE, Value: 2},
		{Kind: StepWait, Dst: slots.Add(256), Count: 1, N: 8, Cmp: CmpGE, Value: 3},
	}
	must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
	must(t, d.DefaultStream().Synchronize())
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 50 * time.Millisecond,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 7}))
	must(t, s.Synchronize())
	r = c.record()
	tag, step, ok = DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 7 || (step != 2 || r.Target != 2) && (step != 3 || r.Target != 3) || r.Observed != 0 {
		t.Fatalf("record %+v (tag %d, step %d, %v): want a timeout of step 2 (target 2) or 3 (target 3)", r, tag, step, ok)
	}
	c.clear()
}
