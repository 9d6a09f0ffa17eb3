package kernels

import (
	"bytes"
	"encoding/binary"
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

// TestPlanReducePeer: two plans on two streams of one GPU, as two ranks
// would run: each replay the first adds 1 to every word of its buffer
// (a reduce step from a buffer of ones) and signals; the second waits,
// reduces that buffer into its own (the way reduce_from reads a peer's
// window) and signals back; the first waits for that before its next
// change. After R replays the second's words hold R x init + R(R+1)/2:
// every reduction saw the first's bytes of its replay, neither older nor
// newer (GPU only).
func TestPlanReducePeer(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	const n, replays = 64<<10 + 12, 500
	init, ones := make([]byte, n), make([]byte, n)
	for i := 0; i < n; i += 4 {
		binary.LittleEndian.PutUint32(init[i:], uint32(1000+i))
		ones[i] = 1
	}
	src, acc, one := alloc(t, d, n), alloc(t, d, n), alloc(t, d, n)
	flags := zeroed(t, d, 256)
	fa, fb := flags, flags.Add(128)
	t0, t1 := alloc(t, d, 3*PlanStepSize), alloc(t, d, 3*PlanStepSize)
	sum := ReduceStepValue(U32, Sum)
	pa := []PlanStep{
		{Kind: StepReduce, Dst: src, Src: one, N: n, Value: sum},
		{Kind: StepAdd, Dst: fb, Value: 1},
		{Kind: StepWait, Dst: fa, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
	}
	pb := []PlanStep{
		{Kind: StepWait, Dst: fb, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
		{Kind: StepReduce, Dst: acc, Src: src, N: n, Value: sum},
		{Kind: StepAdd, Dst: fa, Value: 1},
	}
	must(t, d.MemcpyHtoD(t0, EncodePlan(pa)))
	must(t, d.MemcpyHtoD(t1, EncodePlan(pb)))
	must(t, d.MemcpyHtoD(one, ones))
	for _, gpu := range []bool{false, true} {
		must(t, d.MemcpyHtoD(src, init))
		must(t, d.MemcpyHtoD(acc, make([]byte, n)))
		must(t, d.MemcpyHtoD(flags, make([]byte, 256)))
		must(t, d.DefaultStream().Synchronize())
		must(t, k.Plan(s1, PlanSpec{Steps: t1, Period: 3, Count: 3 * replays, Timeout: 10 * time.Second, Record: c.recordDev(), GPUScope: gpu}))
		must(t, k.Plan(s0, PlanSpec{Steps: t0, Period: 3, Count: 3 * replays, Timeout: 10 * time.Second, Record: c.recordDev(), GPUScope: gpu}))
		must(t, s0.Synchronize())
		must(t, s1.Synchronize())
		must(t, c.check(true))
		want := make([]byte, n)
		cur := append([]byte(nil), init...)
		for range replays {
			ReduceBytes(cur, ones, U32, Sum)
			ReduceBytes(want, cur, U32, Sum)
		}
		if got := read(t, d, acc, n); !bytes.Equal(got, want) {
			i := 0
			for i < n && got[i] == want[i] {
				i++
			}
			t.Fatalf("gpu scope %v: the sum of %d replays differs from byte %d", gpu, replays, i)
		}
	}
}

// TestPlanReduceChain: reduce steps into one destination marked as a
// chain (Count on the first) give the bits of the steps one after another
// (the host reference applied source by source) for every type and
// operator: aligned, as one pass, and with one source misaligned, when the
// interpreter runs them one by one; and the same headed by a copy into
// the destination (Count on the copy too), which the chain starts from
// instead of copying. The step after the chain still runs (GPU only).
func TestPlanReduceChain(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	c := newCtl(t, d)
	const n, k = 4096, 3
	const gap = n + 64 // sources apart, so a shifted one overlaps no other
	dst, srcs, out, init := alloc(t, d, n), alloc(t, d, k*gap), alloc(t, d, n), alloc(t, d, n)
	table := alloc(t, d, 8*PlanStepSize)
	junk := make([]byte, n)
	FillRand(junk, 99)
	// head: a copy into dst heads the chain (Count k), dst holding junk
	// before it: the chain starts from the copy's source.
	for _, head := range []bool{false, true} {
		for _, dt := range DTypes() {
			for _, op := range RedOps() {
				for _, shift := range []uint64{0, dt.Size()} {
					name := fmt.Sprintf("%s %s, source shift %d, copy head %v", dt, op, shift, head)
					a := make([]byte, n)
					FillRand(a, uint64(dt)<<8|uint64(op))
					if dt.Float() {
						saneFloats(a, dt)
					}
					var steps []PlanStep
					if head {
						must(t, d.MemcpyHtoD(dst, junk))
						must(t, d.MemcpyHtoD(init, a))
						steps = append(steps, PlanStep{Kind: StepCopy, Dst: dst, Src: init, N: n, Count: k})
					} else {
						must(t, d.MemcpyHtoD(dst, a))
					}
					first := len(steps)
					for j := uint64(0); j < k; j++ {
						b := make([]byte, n)
						FillRand(b, uint64(dt)<<8|uint64(op)+j+1)
						if dt.Float() {
							saneFloats(b, dt)
						}
						at := srcs.Add(j * gap)
						if j == 1 {
							at = at.Add(shift)
						}
						must(t, d.MemcpyHtoD(at, b))
						ReduceBytes(a, b, dt, op)
						steps = append(steps, PlanStep{Kind: StepReduce, Dst: dst, Src: at, N: n, Value: ReduceStepValue(dt, op)})
					}
					steps[first].Count = k
					steps = append(steps, PlanStep{Kind: StepCopy, Dst: out, Src: dst, N: n})
					must(t, d.MemcpyHtoD(table, EncodePlan(steps)))
					must(t, d.DefaultStream().Synchronize())
					must(t, e.k.Plan(s, PlanSpec{Steps: table, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 5 * time.Second,
						Abort: c.abortDev(), Record: c.recordDev(), Tag: 4}))
					must(t, s.Synchronize())
					must(t, c.check(true))
					if got := read(t, d, dst, n); !bytes.Equal(got, a) {
						t.Fatalf("%s: the destination differs from the sources reduced one by one", name)
					}
					if got := read(t, d, out, n); !bytes.Equal(got, a) {
						t.Fatalf("%s: the copy after the chain read other bytes", name)
					}
				}
			}
		}
	}
}
