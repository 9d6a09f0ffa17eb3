package kernels

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// TestPlanReduce: the plan interpreter's reduce step gives the bits of the
// host reference for every type and operator, over lengths and offsets
// that take the vector body, the head and tail elements and the
// unaligned path, with blocks of 32 and of 512 threads (GPU only). Each
// replay runs: a small copy of thread 0 into the source (the reduction
// must see it), the reduction, a copy of the result (wide, or thread 0's
// when small) and a put_signal of its first bytes (thread 0's, after the
// block's part): both must read the reduced bytes. Two replays reduce
// twice.
func TestPlanReduce(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	c := newCtl(t, d)
	const size = 1 << 20
	dst, src, out := alloc(t, d, size), alloc(t, d, size), alloc(t, d, size)
	pre, sig, slots := alloc(t, d, 64), alloc(t, d, 64), zeroed(t, d, 64)
	table := alloc(t, d, 8*PlanStepSize)
	const replays = 2
	for _, threads := range []uint32{32, 0} {
		for _, dt := range DTypes() {
			for _, op := range RedOps() {
				for _, cs := range []struct{ dOff, sOff, count uint64 }{
					{0, 0, 1}, {0, 0, 4096 + 3}, {dt.Size(), dt.Size(), 777}, {dt.Size(), 0, 1000}, {16, 48, (size - 64) / dt.Size() / 4},
				} {
					name := fmt.Sprintf("%d threads, %s %s, %d elements at +%d from +%d", threads, dt, op, cs.count, cs.dOff, cs.sOff)
					planReduceCase(t, e, planReduceBufs{dst, src, out, pre, sig, slots, table}, s, c, dt, op, cs.dOff, cs.sOff, cs.count, threads, replays, name)
				}
			}
		}
	}
}

// planReduceBufs are TestPlanReduce's device buffers.
type planReduceBufs struct {
	dst, src, out, pre, sig, slots, table cuda.DevicePtr
}

// planReduceCase runs one case of TestPlanReduce.
func planReduceCase(t *testing.T, e *env, b planReduceBufs, s *cuda.Stream, c ctl, dt DType, op RedOp, dOff, sOff, count uint64,
	threads uint32, replays int, name string) {
	t.Helper()
	d := e.d
	n := count * dt.Size()
	a, bb, p := make([]byte, n), make([]byte, n), make([]byte, 8)
	seed := uint64(dt)<<8 | uint64(op)
	FillRand(a, seed)
	FillRand(bb, seed+1)
	FillRand(p, seed+2)
	if dt.Float() {
		saneFloats(a, dt)
		saneFloats(bb, dt)
		saneFloats(p, dt)
	}
	must(t, d.MemcpyHtoD(b.dst.Add(dOff), a))
	must(t, d.MemcpyHtoD(b.src.Add(sOff), bb))
	must(t, d.MemcpyHtoD(b.pre, p))
	must(t, d.MemcpyHtoD(b.slots, make([]byte, 8)))
	must(t, d.MemcpyHtoD(b.sig, make([]byte, 64)))
	must(t, d.DefaultStream().Synchronize())
	var steps []PlanStep
	if n >= 8 {
		// Thread 0 writes the source's first 8 bytes just before.
		steps = append(steps, PlanStep{Kind: StepCopy, Dst: b.src.Add(sOff), Src: b.pre, N: 8})
		copy(bb, p)
	}
	m := min(n, 16)
	steps = append(steps,
		PlanStep{Kind: StepReduce, Dst: b.dst.Add(dOff), Src: b.src.Add(sOff), N: n, Value: ReduceStepValue(dt, op)},
		PlanStep{Kind: StepCopy, Dst: b.out, Src: b.dst.Add(dOff), N: n},
		PlanStep{Kind: StepPutSignal, Dst: b.sig, Src: b.dst.Add(dOff), N: m, Aux: b.slots, Value: 1, Cmp: 1},
	)
	for _, st := range steps {
		must(t, st.Check())
	}
	must(t, d.MemcpyHtoD(b.table, EncodePlan(steps)))
	must(t, d.DefaultStream().Synchronize())
	period := uint32(len(steps))
	must(t, e.k.Plan(s, PlanSpec{Steps: b.table, Period: period, Count: uint64(replays) * uint64(period), Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 3, Threads: threads}))
	must(t, s.Synchronize())
	must(t, c.check(true))
	for range replays {
		ReduceBytes(a, bb, dt, op)
	}
	if got := read(t, d, b.dst.Add(dOff), int(n)); !bytes.Equal(got, a) {
		t.Fatalf("%s: the destination differs from the host reference", name)
	}
	if got := read(t, d, b.out, int(n)); !bytes.Equal(got, a) {
		t.Fatalf("%s: the copy after the reduction read other bytes", name)
	}
	if got := read(t, d, b.sig, int(m)); !bytes.Equal(got, a[:m]) {
		t.Fatalf("%s: the put_signal after the reduction sent other bytes", name)
	}
	if sl := read(t, d, b.slots, 8); u64at(sl, 0) != uint64(replays) {
		t.Fatalf("%s: slot %d after %d replays", name, u64at(sl, 0), replays)
	}
}
