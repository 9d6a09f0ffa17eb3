package kernels

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// The plan interpreter runs copies, fills, stores (moving by replay),
// adds and waits (on one slot and on a sum) for every replay of a launch,
// continues from rep0 in the next launch, and records a wait's timeout
// with its plan's tag and step.
func TestPlanInterpreter(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	src, dst := zeroed(t, d, 4096), zeroed(t, d, 4096)
	iota, bytesBuf := zeroed(t, d, 2048), zeroed(t, d, 64)
	slots := zeroed(t, d, 64)
	steps := []PlanStep{
		{Kind: StepFillRand, Dst: src, N: 1000, Value: 7},
		{Kind: StepCopy, Dst: dst.Add(3), Src: src, N: 997},
		{Kind: StepStore, Dst: slots, Value: 10, Step: 1},
		{Kind: StepAdd, Dst: slots.Add(8), Value: 5},
		{Kind: StepFillIota, Dst: iota, N: 1001, Value: 100},
		{Kind: StepFillByte, Dst: bytesBuf, N: 33, Value: 0xab},
		// 5 bytes into dst at 2000, then slot 2 += 3.
		{Kind: StepPutSignal, Dst: dst.Add(2000), Src: src.Add(10), N: 5, Aux: slots.Add(16), Value: 3, Cmp: 1},
		{Kind: StepWait, Dst: slots, Count: 1, N: 8, Cmp: CmpGE, Value: 10, Step: 1},
		// slot 0 = 10 + r, slot 1 = 5 (r + 1): the sum is 15 + 6r.
		{Kind: StepWait, Dst: slots, Count: 2, N: 8, Cmp: CmpEQ, Value: 15, Step: 6},
	}
	table := uploadPlan(t, d, steps)
	period := uint32(len(steps))
	spec := PlanSpec{Steps: table, Period: period, Count: 3 * uint64(period), Rep0: 0, Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 5}
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	must(t, c.check(true))
	sl := read(t, d, slots, 16)
	if u64at(sl, 0) != 12 || u64at(sl, 8) != 15 {
		t.Fatalf("after 3 replays: slots %d, %d (want 12, 15)", u64at(sl, 0), u64at(sl, 8))
	}
	want := make([]byte, 1000)
	FillRand(want, 7)
	if got := read(t, d, dst, 1000); !bytes.Equal(got[3:], want[:997]) || got[0] != 0 {
		t.Fatal("copy: the destination differs from the random source")
	}
	words := make([]uint32, 251)
	FillIota32(words, 100)
	wantIota := make([]byte, 1004)
	for i, v := range words {
		binary.LittleEndian.PutUint32(wantIota[4*i:], v)
	}
	if got := read(t, d, iota, 1004); !bytes.Equal(got[:1001], wantIota[:1001]) || got[1001] != 0 {
		t.Fatal("iota fill differs")
	}
	if got := read(t, d, bytesBuf, 34); !bytes.Equal(got[:33], bytes.Repeat([]byte{0xab}, 33)) || got[33] != 0 {
		t.Fatal("byte fill differs")
	}
	if got := read(t, d, dst.Add(2000), 6); !bytes.Equal(got[:5], want[10:15]) || got[5] != 0 {
		t.Fatal("put_signal step: the data differs")
	}
	if sl := read(t, d, slots, 24); u64at(sl, 16) != 9 {
		t.Fatalf("put_signal step: slot 2 = %d after 3 replays (want 9)", u64at(sl, 16))
	}
	// The next launch goes on from replay 3.
	spec.Rep0, spec.Count = 3, 2*uint64(period)
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	must(t, c.check(true))
	if sl := read(t, d, slots, 16); u64at(sl, 0) != 14 || u64at(sl, 8) != 25 {
		t.Fatalf("after 5 replays: slots %d, %d (want 14, 25)", u64at(sl, 0), u64at(sl, 8))
	}
	// A graph's launch reads its replay from device memory (epoch 5).
	epoch := zeroed(t, d, 8)
	ep := make([]byte, 8)
	binary.LittleEndian.PutUint64(ep, 5)
	must(t, d.MemcpyHtoD(epoch, ep))
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: period, Count: uint64(period), Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 5, Epoch: epoch}))
	must(t, s.Synchronize())
	must(t, c.check(true))
	if sl := read(t, d, slots, 16); u64at(sl, 0) != 15 || u64at(sl, 8) != 30 {
		t.Fatalf("replay 5 from the epoch: slots %d, %d (want 15, 30)", u64at(sl, 0), u64at(sl, 8))
	}
	// Replays 6 and 7 in three launches, the middle one running on from
	// the end of replay 6 into the start of 7: steps 0-5 of 6, steps 6-8
	// of 6 with 0-5 of 7, steps 6-8 of 7. The waits' targets (the second
	// one exact) follow each step's replay.
	for _, l := range []struct {
		first uint32
		count uint64
		rep0  uint64
	}{{0, 6, 6}, {6, 9, 6}, {6, 3, 7}} {
		must(t, k.Plan(s, PlanSpec{Steps: table, Period: period, First: l.first, Count: l.count, Rep0: l.rep0,
			Timeout: 5 * time.Second, Abort: c.abortDev(), Record: c.recordDev(), Tag: 5}))
	}
	must(t, s.Synchronize())
	must(t, c.check(true))
	if sl := read(t, d, slots, 24); u64at(sl, 0) != 17 || u64at(sl, 8) != 40 || u64at(sl, 16) != 24 {
		t.Fatalf("replays 6-7 across launches: slots %d, %d, %d (want 17, 40, 24)", u64at(sl, 0), u64at(sl, 8), u64at(sl, 16))
	}
	// A wait nobody satisfies: the record names the plan and the step,
	// and the step after it (step 0 of the next replay) never runs.
	bad := []PlanStep{
		{Kind: StepStore, Dst: slots.Add(40), Value: 99},
		{Kind: StepWait, Dst: slots.Add(32), Count: 1, N: 8, Cmp: CmpGE, Value: 1},
	}
	badTable := uploadPlan(t, d, bad)
	t0 := time.Now()
	must(t, k.Plan(s, PlanSpec{Steps: badTable, Period: 2, First: 1, Count: 2, Timeout: 50 * time.Millisecond,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 9}))
	must(t, s.Synchronize())
	r := c.record()
	tag, step, ok := DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 9 || step != 1 || r.Target != 1 || r.Observed != 0 {
		t.Fatalf("record %+v (tag %d, step %d, %v)", r, tag, step, ok)
	}
	if dt := time.Since(t0); dt < 50*time.Millisecond || dt > 2*time.Second {
		t.Fatalf("the timed-out plan returned after %v", dt)
	}
	if sl := read(t, d, slots, 48); u64at(sl, 40) != 0 {
		t.Fatal("the step after the failed wait ran")
	}
	// A poisoned record keeps the next launch from running at all.
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	if sl := read(t, d, slots, 16); u64at(sl, 0) != 17 {
		t.Fatal("a launch ran with a failure on record")
	}
	c.clear()
	if err := k.Plan(s, PlanSpec{Steps: table, Period: period, Count: 0}); err == nil {
		t.Fatal("a plan of no steps was launched")
	}
	if err := k.Plan(s, PlanSpec{Steps: table, Period: period, First: period, Count: 1}); err == nil {
		t.Fatal("a launch from a step past the plan was accepted")
	}
	if _, _, ok := DecodePlanFailure(3); ok {
		t.Fatal("a plain wait's record read as a plan's")
	}
}

// Moving values given with a launch replace the table's for that launch
// (the table in device memory stays as it was) and count from the
// launch's first replay. Bad moves are refused before anything is
// enqueued.
func TestPlanMoves(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	slots := zeroed(t, d, 64)
	steps := []PlanStep{
		{Kind: StepStore, Dst: slots, Value: 1000, Step: 1},
		{Kind: StepAdd, Dst: slots.Add(8), Value: 2},
		{Kind: StepStore, Dst: slots.Add(16), Value: 7},
		// Met only with the launch's value: the table's 1000 + r is not.
		{Kind: StepWait, Dst: slots.Add(8), Count: 1, N: 8, Cmp: CmpGE, Value: 1000, Step: 2},
	}
	table := uploadPlan(t, d, steps)
	spec := PlanSpec{Steps: table, Period: 4, Count: 3 * 4, Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 3,
		Moves: []PlanMove{{Step: 0, Value: 40}, {Step: 3, Value: 2}}}
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	must(t, c.check(true))
	if sl := read(t, d, slots, 24); u64at(sl, 0) != 42 || u64at(sl, 8) != 6 || u64at(sl, 16) != 7 {
		t.Fatalf("after 3 replays with moves: slots %d, %d, %d (want 42, 6, 7)", u64at(sl, 0), u64at(sl, 8), u64at(sl, 16))
	}
	// Without moves the table's own values hold: slot 0 = 1000 + r.
	spec.Moves, spec.Count, spec.Rep0, spec.Timeout = nil, 1, 0, 50*time.Millisecond
	must(t, k.Plan(s, spec))
	must(t, s.Synchronize())
	if sl := read(t, d, slots, 8); u64at(sl, 0) != 1000 {
		t.Fatalf("without moves: slot 0 = %d (want the table's 1000)", u64at(sl, 0))
	}
	c.clear()
	// A table of PlanCache steps with every move set, the last one at
	// the last step with the largest value: each word of the launch's
	// struct reaches its step. Step j stores j into word j.
	words := zeroed(t, d, 8*PlanCache)
	full := make([]PlanStep, PlanCache)
	for j := range full {
		full[j] = PlanStep{Kind: StepStore, Dst: words.Add(uint64(8 * j)), Value: uint64(j)}
	}
	fullTable := uploadPlan(t, d, full)
	var moves []PlanMove
	for j := PlanCache - PlanMoves; j < PlanCache; j++ {
		moves = append(moves, PlanMove{Step: j, Value: uint64(1000 + j)})
	}
	moves[len(moves)-1].Value = PlanMoveMax - 1
	must(t, k.Plan(s, PlanSpec{Steps: fullTable, Period: PlanCache, Count: PlanCache, Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 3, Moves: moves}))
	must(t, s.Synchronize())
	must(t, c.check(true))
	got := read(t, d, words, 8*PlanCache)
	for j := 0; j < PlanCache; j++ {
		want := uint64(j)
		switch {
		case j == PlanCache-1:
			want = PlanMoveMax - 1
		case j >= PlanCache-PlanMoves:
			want = uint64(1000 + j)
		}
		if u64at(got, 8*j) != want {
			t.Fatalf("a full table of moves: word %d = %d, want %d", j, u64at(got, 8*j), want)
		}
	}
	for name, m := range map[string][]PlanMove{
		"step past the plan": {{Step: 4, Value: 1}},
		"value too large":    {{Step: 0, Value: PlanMoveMax}},
		"too many":           make([]PlanMove, PlanMoves+1),
	} {
		sp := spec
		sp.Moves = m
		if err := k.Plan(s, sp); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Two plans on two streams of one GPU play put_signal ping-pong: each
// replay copies 8 bytes, signals the other and waits for its answer, in
// one launch of 2000 replays; beside it the raw flag ping-pong.
func TestPlanPingPong(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	data, flags, out := zeroed(t, d, 256), zeroed(t, d, 256), zeroed(t, d, 16)
	f0, f1 := flags, flags.Add(128)
	const iters = 2000
	ping := []PlanStep{
		{Kind: StepCopy, Dst: data.Add(128), Src: data, N: 8},
		{Kind: StepStore, Dst: f1, Value: 1, Step: 1},
		{Kind: StepWait, Dst: f0, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
	}
	pong := []PlanStep{
		{Kind: StepWait, Dst: f1, Count: 1, N: 8, Cmp: CmpGE, Value: 1, Step: 1},
		{Kind: StepCopy, Dst: data, Src: data.Add(128), N: 8},
		{Kind: StepStore, Dst: f0, Value: 1, Step: 1},
	}
	// "copy": a copy step then a signal step; "fused": one put_signal
	// step (the fused step adds 1 to the flag); "private": the fused step
	// from a source no peer writes (16 bytes: the waits read it early);
	// "flag": the signal alone. pacq: single-slot waits poll with acquire
	// loads.
	t0, t1 := alloc(t, d, 3*PlanStepSize), alloc(t, d, 3*PlanStepSize)
	for _, v := range []struct {
		how     string
		threads uint32
		gpu     bool
		pacq    bool
	}{{"copy", 0, false, false}, {"copy", 0, true, false}, {"fused", 0, false, false}, {"fused", 0, true, false},
		{"flag", 0, true, false}, {"fused", 32, true, false}, {"private", 0, true, false}, {"private", 0, true, true},
		{"private", 0, false, false}, {"flag", 0, true, true}, {"line", 0, true, false}, {"line-first", 0, true, false}} {
		p0, p1 := ping, pong
		switch v.how {
		case "flag":
			p0, p1 = []PlanStep{ping[1], ping[2]}, []PlanStep{pong[0], pong[2]}
		case "fused":
			p0 = []PlanStep{{Kind: StepPutSignal, Dst: ping[0].Dst, Src: ping[0].Src, N: 8, Aux: f1, Value: 1, Cmp: 1}, ping[2]}
			p1 = []PlanStep{pong[0], {Kind: StepPutSignal, Dst: pong[1].Dst, Src: pong[1].Src, N: 8, Aux: f0, Value: 1, Cmp: 1}}
		case "private":
			// Rank 0's 16 bytes at data+32 land at data+128, rank 1's at
			// data+64 land at data.
			p0 = []PlanStep{{Kind: StepPutSignal, Dst: data.Add(128), Src: data.Add(32), N: 16, Aux: f1, Value: 1, Cmp: 1 | PutPrivate}, ping[2]}
			p1 = []PlanStep{pong[0], {Kind: StepPutSignal, Dst: data, Src: data.Add(64), N: 16, Aux: f0, Value: 1, Cmp: 1 | PutPrivate}}
		case "line", "line-first":
			// Each put_signal of 8 bytes in one line (rank 1's at
			// data+192, rank 0's at data+208); each drain lands the
			// payload as "private" does and adds 1 to its own flag.
			// line-first: the drain sends the next line before.
			first := uint32(0)
			if v.how == "line-first" {
				first = LineSendFirst
			}
			p0 = []PlanStep{{Kind: StepLinePut, Dst: data.Add(192), Src: data.Add(32), N: 8, Value: 1, Step: 1, Cmp: PutPrivate},
				{Kind: StepLineWait, Dst: data.Add(208), Src: data, N: 8, Value: 1, Step: 1, Cmp: 1, Aux: f0, Count: first}}
			p1 = []PlanStep{{Kind: StepLineWait, Dst: data.Add(192), Src: data.Add(128), N: 8, Value: 1, Step: 1, Cmp: 1, Aux: f1, Count: first},
				{Kind: StepLinePut, Dst: data.Add(208), Src: data.Add(64), N: 8, Value: 1, Step: 1, Cmp: PutPrivate}}
		}
		must(t, d.MemcpyHtoD(t0, EncodePlan(p0)))
		must(t, d.MemcpyHtoD(t1, EncodePlan(p1)))
		must(t, d.MemcpyHtoD(flags, make([]byte, 256)))
		init := make([]byte, 256)
		for i := range 16 {
			init[32+i], init[64+i] = byte(0xa0+i), byte(0xc0+i)
		}
		must(t, d.MemcpyHtoD(data, init))
		n := uint32(len(p0))
		must(t, k.Plan(s1, PlanSpec{Steps: t1, Period: n, Count: uint64(n) * iters, Timeout: 10 * time.Second, Record: c.recordDev(), GPUScope: v.gpu, PollAcquire: v.pacq, Threads: v.threads}))
		dt := timeIt(t, d, s0, func() {
			must(t, k.Plan(s0, PlanSpec{Steps: t0, Period: n, Count: uint64(n) * iters, Timeout: 10 * time.Second, Record: c.recordDev(), GPUScope: v.gpu, PollAcquire: v.pacq, Threads: v.threads}))
		})
		must(t, s1.Synchronize())
		must(t, c.check(true))
		if fl := read(t, d, flags, 136); u64at(fl, 0) != iters || u64at(fl, 128) != iters {
			t.Fatalf("flags %d, %d after %d round trips", u64at(fl, 0), u64at(fl, 128), iters)
		}
		if v.how == "private" || strings.HasPrefix(v.how, "line") {
			m := 16
			if v.how != "private" {
				m = 8
			}
			got := read(t, d, data, 256)
			if !bytes.Equal(got[128:128+m], init[32:32+m]) || !bytes.Equal(got[0:m], init[64:64+m]) {
				t.Fatalf("%s put_signal: landed % x and % x", v.how, got[128:128+m], got[0:m])
			}
		}
		t.Logf("MEASURED plan ping-pong (%s, threads %d, gpu scope %v, poll acquire %v): %.0f ns per round trip", v.how, v.threads, v.gpu, v.pacq, float64(dt.Nanoseconds())/iters)
	}
	must(t, d.MemcpyHtoD(flags, make([]byte, 256)))
	must(t, k.PingPong(s1, f1, f0, iters, false, 10*time.Second, out.Add(8)))
	must(t, k.PingPong(s0, f0, f1, iters, true, 10*time.Second, out))
	must(t, s0.Synchronize())
	must(t, s1.Synchronize())
	t.Logf("MEASURED raw flag ping-pong, same run: %.0f ns per round trip", float64(u64at(read(t, d, out, 8), 0))/iters)
}

// Two plans on two streams of one GPU trade put_signals of more than 8
// bytes as lines, every thread its share: each replay a rank adds 1 to
// every word of its source, sends it in lines and adds what its drain
// brought to a sum, so a replay that drained another replay's lines, or
// a mix, leaves a wrong sum. An odd size leaves a part line; 32 threads
// take many lines each. A drain nobody sends to times out, naming its
// step.
func TestPlanWideLines(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	const n, iters = 4100, 500
	const src, recv, sum, ones = 0, 8192, 16384, 24576
	words := n / 4
	init := make([]byte, 32768)
	for i := 0; i < words; i++ {
		binary.LittleEndian.PutUint32(init[src+4*i:], uint32(7*i))
		binary.LittleEndian.PutUint32(init[ones+4*i:], 1)
	}
	add := ReduceStepValue(U32, Sum)
	for _, threads := range []uint32{0, 32} {
		a, b := zeroed(t, d, 32768), zeroed(t, d, 32768)
		must(t, d.MemcpyHtoD(a, init))
		must(t, d.MemcpyHtoD(b, init))
		lines, flags := zeroed(t, d, 2*16384), zeroed(t, d, 256)
		toB, toA := lines, lines.Add(16384)
		// Each side: bump the source, send it, drain the other's, sum it.
		side := func(mem, out, in, flag cuda.DevicePtr, drainFirst bool) []PlanStep {
			bump := PlanStep{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: n, Value: add}
			put := PlanStep{Kind: StepLinePut, Dst: out, Src: mem.Add(src), N: n, Value: 1, Step: 1}
			drain := PlanStep{Kind: StepLineWait, Dst: in, Src: mem.Add(recv), N: n, Value: 1, Step: 1, Cmp: 1, Aux: flag}
			acc := PlanStep{Kind: StepReduce, Dst: mem.Add(sum), Src: mem.Add(recv), N: n, Value: add}
			if drainFirst {
				return []PlanStep{drain, acc, bump, put}
			}
			return []PlanStep{bump, put, drain, acc}
		}
		pa, pb := side(a, toB, toA, flags, false), side(b, toA, toB, flags.Add(128), true)
		ta, tb := uploadPlan(t, d, pa), uploadPlan(t, d, pb)
		spec := func(tab cuda.DevicePtr) PlanSpec {
			return PlanSpec{Steps: tab, Period: 4, Count: 4 * iters, Timeout: 10 * time.Second, Record: c.recordDev(), GPUScope: true, Threads: threads}
		}
		must(t, k.Plan(s1, spec(tb)))
		dt := timeIt(t, d, s0, func() { must(t, k.Plan(s0, spec(ta))) })
		must(t, s1.Synchronize())
		must(t, c.check(true))
		if fl := read(t, d, flags, 136); u64at(fl, 0) != iters || u64at(fl, 128) != iters {
			t.Fatalf("threads %d: drain counts %d, %d after %d replays", threads, u64at(fl, 0), u64at(fl, 128), iters)
		}
		for name, mem := range map[string]cuda.DevicePtr{"a": a, "b": b} {
			got := read(t, d, mem.Add(sum), n)
			for i := 0; i < words; i++ {
				// Replay r (1..iters) brings 7i + r.
				want := uint32(iters*7*i + iters*(iters+1)/2)
				if g := binary.LittleEndian.Uint32(got[4*i:]); g != want {
					t.Fatalf("threads %d: rank %s's sum word %d = %d, want %d", threads, name, i, g, want)
				}
			}
		}
		t.Logf("MEASURED wide lines (%d bytes, threads %d): %.0f ns per round trip", n, threads, float64(dt.Nanoseconds())/iters)
	}
	// A drain of lines nobody sends.
	lines, flags, mem := zeroed(t, d, 16384), zeroed(t, d, 64), zeroed(t, d, 8192)
	bad := []PlanStep{{Kind: StepLineWait, Dst: lines, Src: mem, N: n, Value: 1, Step: 1, Cmp: 1, Aux: flags}}
	tab := uploadPlan(t, d, bad)
	t0 := time.Now()
	must(t, k.Plan(s0, PlanSpec{Steps: tab, Period: 1, Count: 1, Timeout: 50 * time.Millisecond, Abort: c.abortDev(), Record: c.recordDev(), Tag: 4}))
	must(t, s0.Synchronize())
	r := c.record()
	tag, step, ok := DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 4 || step != 0 || r.Target != 1 {
		t.Fatalf("record %+v (tag %d, step %d, %v)", r, tag, step, ok)
	}
	if dt := time.Since(t0); dt < 50*time.Millisecond || dt > 2*time.Second {
		t.Fatalf("the timed-out drain returned after %v", dt)
	}
	if fl := read(t, d, flags, 8); u64at(fl, 0) != 0 {
		t.Fatal("a failed drain added to its slot")
	}
	c.clear()
}

// The GPU time of small wide steps on plain device memory, one launch of
// 2,000 replays each: copies of 1 KiB (one, three), a reduction of 1 KiB,
// a fill; each copy's bytes checked (the numbers go to the log).
func TestPlanStepCost(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	c := newCtl(t, d)
	const size, reps = 65536, 2000
	init := make([]byte, size)
	FillRand(init, 11)
	mem := alloc(t, d, size)
	must(t, d.MemcpyHtoD(mem, init))
	table := alloc(t, d, 8*PlanStepSize)
	cp := func(dst, src uint64) PlanStep {
		return PlanStep{Kind: StepCopy, Dst: mem.Add(dst), Src: mem.Add(src), N: 1024}
	}
	red := PlanStep{Kind: StepReduce, Dst: mem.Add(40960), Src: mem.Add(45056), N: 1024, Value: ReduceStepValue(U32, Sum)}
	for _, v := range []struct {
		name  string
		steps []PlanStep
	}{
		{"1 copy", []PlanStep{cp(16384, 0)}},
		{"3 copies", []PlanStep{cp(16384, 0), cp(20480, 4096), cp(24576, 8192)}},
		{"1 reduce", []PlanStep{red}},
		{"1 copy of 64 bytes (thread 0)", []PlanStep{{Kind: StepCopy, Dst: mem.Add(30000), Src: mem.Add(12000), N: 64}}},
		{"1 fill", []PlanStep{{Kind: StepFillByte, Dst: mem.Add(32768), N: 1024, Value: 7}}},
	} {
		must(t, d.MemcpyHtoD(table, EncodePlan(v.steps)))
		must(t, d.DefaultStream().Synchronize())
		n := uint32(len(v.steps))
		for _, threads := range []uint32{512, 128} {
			ns := replayNs(t, e, s, c, PlanSpec{Steps: table, Period: n, Threads: threads}, reps)
			t.Logf("MEASURED plan steps, %s, %d threads: %.0f ns a replay", v.name, threads, ns)
		}
	}
	got := read(t, d, mem, size)
	for j, off := range []int{0, 4096, 8192} {
		if !bytes.Equal(got[16384+4096*j:16384+4096*j+1024], init[off:off+1024]) {
			t.Fatalf("copy %d did not land", j)
		}
	}
}

// Line groups: a plan sends one source to three line areas as one group
// of line puts and drains the three as one group of drains, replay after
// replay, the source bumped each replay and every drained copy summed; of
// 8 bytes (one line each) and of 4,100 (a part line), on 512 threads and
// on 32. A group whose third drain nobody feeds times out.
func TestPlanLineGroups(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	const iters = 300
	const src, ones, recv, sum = 0, 8192, 16384, 32768 // recv and sum: 3 areas 4,096 + 64 bytes apart
	const gap = 4096 + 64
	add := ReduceStepValue(U32, Sum)
	for _, n := range []uint64{8, 4100} {
		for _, threads := range []uint32{0, 32} {
			words := int(n / 4)
			init := make([]byte, 65536)
			for i := 0; i < words; i++ {
				binary.LittleEndian.PutUint32(init[src+4*i:], uint32(3*i+1))
				binary.LittleEndian.PutUint32(init[ones+4*i:], 1)
			}
			mem, lines, flags := alloc(t, d, 65536), zeroed(t, d, 3*16384), zeroed(t, d, 3*128)
			must(t, d.MemcpyHtoD(mem, init))
			steps := []PlanStep{{Kind: StepReduce, Dst: mem.Add(src), Src: mem.Add(ones), N: n, Value: add}}
			for g := uint64(0); g < 3; g++ {
				st := PlanStep{Kind: StepLinePut, Dst: lines.Add(g * 16384), Src: mem.Add(src), N: n, Value: 1, Step: 1}
				if g == 0 {
					st.Count = 3
				}
				steps = append(steps, st)
			}
			for g := uint64(0); g < 3; g++ {
				st := PlanStep{Kind: StepLineWait, Dst: lines.Add(g * 16384), Src: mem.Add(recv + g*gap), N: n, Value: 1, Step: 1, Cmp: 1, Aux: flags.Add(g * 128)}
				if g == 0 {
					st.Count = 3 << LineGroupShift
				}
				steps = append(steps, st)
			}
			for g := uint64(0); g < 3; g++ {
				steps = append(steps, PlanStep{Kind: StepReduce, Dst: mem.Add(sum + g*gap), Src: mem.Add(recv + g*gap), N: n, Value: add})
			}
			runReplays(t, d, k, s, c, steps, iters, threads)
			fl := read(t, d, flags, 3*128)
			got := read(t, d, mem, 65536)
			for g := 0; g < 3; g++ {
				if u64at(fl, 128*g) != iters {
					t.Fatalf("%d bytes, threads %d: drain %d added %d, want %d", n, threads, g, u64at(fl, 128*g), iters)
				}
				for i := 0; i < words; i++ {
					// Replay r (1..iters) drains 3i+1+r.
					want := uint32(iters*(3*i+1) + iters*(iters+1)/2)
					if v := binary.LittleEndian.Uint32(got[sum+g*gap+4*i:]); v != want {
						t.Fatalf("%d bytes, threads %d: copy %d's sum word %d = %d, want %d", n, threads, g, i, v, want)
					}
				}
			}
		}
	}
	// The third drain of a group has no put: the group times out at its
	// first step, and adds to no slot.
	lines, flags, mem := zeroed(t, d, 3*16384), zeroed(t, d, 3*128), zeroed(t, d, 16384)
	steps := []PlanStep{
		{Kind: StepLinePut, Dst: lines, Src: mem, N: 64, Value: 1, Step: 1, Count: 2},
		{Kind: StepLinePut, Dst: lines.Add(16384), Src: mem, N: 64, Value: 1, Step: 1},
	}
	for g := uint64(0); g < 3; g++ {
		st := PlanStep{Kind: StepLineWait, Dst: lines.Add(g * 16384), Src: mem.Add(4096 + 128*g), N: 64, Value: 1, Step: 1, Cmp: 1, Aux: flags.Add(g * 128)}
		if g == 0 {
			st.Count = 3 << LineGroupShift
		}
		steps = append(steps, st)
	}
	table := uploadPlan(t, d, steps)
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: uint32(len(steps)), Count: uint64(len(steps)), Timeout: 50 * time.Millisecond,
		Abort: c.abortDev(), Record: c.recordDev(), Tag: 6}))
	must(t, s.Synchronize())
	r := c.record()
	tag, step, ok := DecodePlanFailure(r.Slot)
	if r.Status != StatusTimeout || !ok || tag != 6 || step != 2 || r.Target != 1 {
		t.Fatalf("record %+v (tag %d, step %d, %v)", r, tag, step, ok)
	}
	if fl := read(t, d, flags, 3*128); u64at(fl, 0) != 0 || u64at(fl, 128) != 0 || u64at(fl, 256) != 0 {
		t.Fatal("a failed drain group added to a slot")
	}
	c.clear()
}
