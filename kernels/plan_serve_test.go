package kernels

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// serveRing is a server's ring and state in host-mapped memory.
type serveRing struct {
	ring, state *cuda.MappedMem
}

func newServeRing(t *testing.T, d *cuda.Driver) serveRing {
	t.Helper()
	ring, err := d.AllocMapped(PlanServeSlots * PlanServeCmdSize)
	must(t, err)
	t.Cleanup(func() { _ = ring.Free() })
	state, err := d.AllocMapped(PlanServeStateSize)
	must(t, err)
	t.Cleanup(func() { _ = state.Free() })
	clear(ring.Bytes())
	clear(state.Bytes())
	return serveRing{ring, state}
}

// post waits for a free slot and posts p as command seq.
func (r serveRing) post(t *testing.T, seq uint64, p PlanSpec) {
	t.Helper()
	r.room(t, seq)
	must(t, ServePlanCmd(r.ring.Host, seq, p))
}

// stop waits for a free slot and posts STOP as command seq.
func (r serveRing) stop(t *testing.T, seq uint64) {
	t.Helper()
	r.room(t, seq)
	ServeStopCmd(r.ring.Host, seq)
}

// room waits until command seq's slot is free: the command PlanServeSlots
// before it done.
func (r serveRing) room(t *testing.T, seq uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if done, _ := ServeState(r.state.Host); seq <= PlanServeSlots || done >= seq-PlanServeSlots {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %d: no free slot in 5 s", seq)
		}
	}
}

// One server runs twenty calls of two plans in turn, eight slots for them
// (the host waiting for free ones), with moving values given per call, and
// ends at STOP; a call that fails ends it, and so does the abort flag.
func TestPlanServe(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	r := newServeRing(t, d)
	const n = 1024
	mem := zeroed(t, d, 3*n+64)
	ones := make([]byte, n)
	for i := 0; i < n; i += 4 {
		binary.LittleEndian.PutUint32(ones[i:], 1)
	}
	must(t, d.MemcpyHtoD(mem.Add(n), ones))
	add := ReduceStepValue(U32, Sum)
	pa := []PlanStep{{Kind: StepReduce, Dst: mem, Src: mem.Add(n), N: n, Value: add}}
	pb := []PlanStep{{Kind: StepFillByte, Dst: mem.Add(2 * n), N: n, Value: 9}, {Kind: StepStore, Dst: mem.Add(3 * n), Value: 1}}
	ta, tb := uploadPlan(t, d, pa), uploadPlan(t, d, pb)
	spec := func(table cuda.DevicePtr, period uint32, replays uint64) PlanSpec {
		return PlanSpec{Steps: table, Period: period, Count: uint64(period) * replays, Timeout: 5 * time.Second,
			Abort: c.abortDev(), Record: c.recordDev(), Tag: 5}
	}
	must(t, k.PlanServe(s, r.ring.Dev, 1, r.state.Dev, c.abortDev(), PlanSmallThreads))
	for seq := uint64(1); seq <= 20; seq++ {
		if seq%2 == 1 {
			r.post(t, seq, spec(ta, 1, 3))
		} else {
			sp := spec(tb, 2, 1)
			sp.Moves = []PlanMove{{Step: 1, Value: 1000 + seq}}
			r.post(t, seq, sp)
		}
	}
	r.stop(t, 21)
	must(t, s.Synchronize())
	must(t, c.check(true))
	if done, ended := ServeState(r.state.Host); done != 20 || ended != 1 {
		t.Fatalf("state: done %d, ended %d; want 20 and 1", done, ended)
	}
	got := read(t, d, mem, 3*n+8)
	for i := 0; i < n; i += 4 {
		if v := binary.LittleEndian.Uint32(got[i:]); v != 30 {
			t.Fatalf("word %d: %d after 10 calls of 3 replays, want 30", i/4, v)
		}
		if got[2*n+i] != 9 {
			t.Fatalf("fill: byte %d is %d", 2*n+i, got[2*n+i])
		}
	}
	if v := u64at(got, 3*n); v != 1020 {
		t.Fatalf("the last call's moved store wrote %d, want 1020", v)
	}

	// A call whose wait nobody satisfies fails and ends the server.
	slot := zeroed(t, d, 8)
	tw := uploadPlan(t, d, []PlanStep{{Kind: StepWait, Dst: slot, Count: 1, N: 8, Cmp: CmpGE, Value: 1}})
	must(t, k.PlanServe(s, r.ring.Dev, 22, r.state.Dev, c.abortDev(), PlanSmallThreads))
	sw := spec(tw, 1, 1)
	sw.Timeout = 50 * time.Millisecond
	r.post(t, 22, sw)
	r.post(t, 23, spec(ta, 1, 1))
	must(t, s.Synchronize())
	rec := c.record()
	if tag, step, ok := DecodePlanFailure(rec.Slot); rec.Status != StatusTimeout || !ok || tag != 5 || step != 0 {
		t.Fatalf("record %+v (tag %d, step %d, %v), want a timeout at step 0", rec, tag, step, ok)
	}
	if done, ended := ServeState(r.state.Host); done != 22 || ended != 22 {
		t.Fatalf("after a failed call: done %d, ended %d; want 22 and 22", done, ended)
	}
	if v := binary.LittleEndian.Uint32(read(t, d, mem, 4)); v != 30 {
		t.Fatalf("a call after the failed one ran: word 0 is %d", v)
	}
	c.clear()

	// An idle server ends on the abort flag.
	must(t, k.PlanServe(s, r.ring.Dev, 24, r.state.Dev, c.abortDev(), PlanSmallThreads))
	time.Sleep(time.Millisecond)
	c.setAbort()
	must(t, s.Synchronize())
	c.clear()
	if _, ended := ServeState(r.state.Host); ended != 24 {
		t.Fatalf("after the abort flag: ended %d, want 24", ended)
	}
}

// The host's checks: a command the server could not run is refused.
func TestServePlanCmdChecks(t *testing.T) {
	ring := make([]byte, PlanServeSlots*PlanServeCmdSize)
	p := PlanSpec{Steps: 64, Period: 2, Count: 2}
	for _, bad := range []PlanSpec{
		{Steps: 64, Period: 2, Count: 0},
		{Steps: 64, Period: 2, Count: 2, First: 2},
		{Steps: 64, Period: 2, Count: 2, Blocks: 2},
		{Steps: 64, Period: 2, Count: 2, Epoch: 8},
		{Steps: 64, Period: 2, Count: 2, Moves: []PlanMove{{Step: 2, Value: 1}}},
	} {
		if err := ServePlanCmd(unsafePtr(ring), 1, bad); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	p.Rep0, p.Tag, p.Moves = 7, 3, []PlanMove{{Step: 1, Value: 5}}
	must(t, ServePlanCmd(unsafePtr(ring), 9, p))
	// Slot 1, line k: word k of the command, then its number.
	line := func(slot, k int) (uint64, uint64) {
		at := slot*PlanServeCmdSize + 16*k
		return binary.LittleEndian.Uint64(ring[at:]), binary.LittleEndian.Uint64(ring[at+8:])
	}
	want := map[int]uint64{0: serveRun, 1: 64, 2: 2, 4: 2, 5: 7, 8: 3, 10: 1, 11: 1<<planMoveBit | 5}
	for k := 0; k < serveWords; k++ {
		if w, seq := line(1, k); seq != 9 || w != want[k] {
			t.Errorf("command 9, line %d: word %d, number %d; want %d, 9", k, w, seq, want[k])
		}
	}
	if _, seq := line(1, serveWords); seq != 0 {
		t.Errorf("command 9 wrote past its lines (number %d)", seq)
	}
	ServeStopCmd(unsafePtr(ring), 10)
	for k := 0; k < serveWords; k++ {
		if w, seq := line(2, k); seq != 10 || (k == 0) != (w == serveStop) || k > 0 && w != 0 {
			t.Errorf("stop 10, line %d: word %d, number %d", k, w, seq)
		}
	}
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
