package kernels

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// agpRank is one simulated rank of a two-rank persistent all-gather in one
// process: its window data, staging area, counters, slots and the device
// pointer tables the one-launch kernels read.
type agpRank struct {
	data, stage, mem, src cuda.DevicePtr
	ready, done           AGPSpec
	bases, stages         cuda.DevicePtr
	s                     *cuda.Stream
	c                     ctl
}

func table(t *testing.T, d *cuda.Driver, ptrs ...cuda.DevicePtr) cuda.DevicePtr {
	t.Helper()
	b := make([]byte, 8*len(ptrs))
	for i, p := range ptrs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(p))
	}
	p := alloc(t, d, uint64(len(b)))
	must(t, d.MemcpyHtoD(p, b))
	must(t, d.DefaultStream().Synchronize())
	return p
}

// newAGPPair makes two simulated ranks of a persistent all-gather on one
// GPU, with windows of 2 x maxN bytes.
func newAGPPair(t *testing.T, d *cuda.Driver, maxN uint64) [2]*agpRank {
	t.Helper()
	// slots[r][p]: rank r's ready (0) and done (1) slot written by rank p.
	slots := zeroed(t, d, 2*2*2*8)
	slot := func(kind, r, p int) cuda.DevicePtr { return slots.Add(uint64(((kind*2+r)*2 + p) * 8)) }
	var rk [2]*agpRank
	for r := range rk {
		rk[r] = &agpRank{data: zeroed(t, d, 2*maxN), stage: zeroed(t, d, AGPLLStageBytes(2)+AGPStagedBytes(2, maxN)), mem: zeroed(t, d, 128),
			src: alloc(t, d, maxN+8), s: newStream(t, d), c: newCtl(t, d)}
	}
	for r, x := range rk {
		p := 1 - r
		base := AGPSpec{Count: x.mem, Rank: uint32(r), Size: 2, Timeout: 10 * time.Second, Abort: x.c.abortDev(), Record: x.c.recordDev()}
		x.ready, x.done = base, base
		x.ready.Remote = table(t, d, slot(0, p, r), slot(0, p, r)) // entry r is ignored
		x.ready.Local = table(t, d, slot(0, r, p), slot(0, r, p))
		x.done.Remote = table(t, d, slot(1, p, r), slot(1, p, r))
		x.done.Local = table(t, d, slot(1, r, p), slot(1, r, p))
		x.bases = table(t, d, rk[0].data, rk[1].data)
		x.stages = table(t, d, rk[0].stage, rk[1].stage)
	}
	return rk
}

// TestAGPDoneReady runs execs back to back whose done and next ready
// kernels are one launch (DoneReady), with a trace, between two ranks on
// one GPU: every exec's copies land (the last exec's data is checked),
// the counter and slots end at the last exec, and every exec has its
// stamps.
func TestAGPDoneReady(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	ak, err := k.AGP()
	must(t, err)
	const n, execs = 1<<20 + 5, 6
	rk := newAGPPair(t, d, n)
	want := make([][]byte, 2)
	for r, x := range rk {
		x.ready.Trace = zeroed(t, d, AGPTraceBytes)
		x.done.Trace = x.ready.Trace
		want[r] = make([]byte, n)
		rand.New(rand.NewSource(int64(r))).Read(want[r])
		must(t, d.MemcpyHtoD(x.src, want[r]))
	}
	must(t, d.DefaultStream().Synchronize())
	for _, x := range rk {
		must(t, ak.Ready(x.s, x.ready))
	}
	for i := 0; i < execs; i++ {
		for r, x := range rk {
			must(t, d.MemcpyAsync(x.data.Add(uint64(r)*n), x.src, n, x.s))
			must(t, d.MemcpyAsync(rk[1-r].data.Add(uint64(r)*n), x.src, n, x.s))
			if i < execs-1 {
				must(t, ak.DoneReady(x.s, x.done, x.ready, n))
			} else {
				must(t, ak.Done(x.s, x.done, n))
			}
		}
	}
	for _, x := range rk {
		must(t, x.s.Synchronize())
		must(t, x.c.check(true))
	}
	for r, x := range rk {
		got := read(t, d, x.data, 2*n)
		for q := 0; q < 2; q++ {
			if !bytes.Equal(got[q*n:(q+1)*n], want[q]) {
				t.Fatalf("rank %d holds a wrong chunk %d", r, q)
			}
		}
		if c := u64at(read(t, d, x.mem, 8), 0); c != execs {
			t.Fatalf("rank %d: counter %d after %d execs", r, c, execs)
		}
		for i, sp := range []AGPSpec{x.ready, x.done} {
			slot := cuda.DevicePtr(u64at(read(t, d, sp.Local, 16), 8*(1-r)))
			want := []uint64{execs, AGPTag(execs, n)}[i]
			if v := u64at(read(t, d, slot, 8), 0); v != want {
				t.Fatalf("rank %d: slot %d holds %#x, want %#x", r, i, v, want)
			}
		}
		p, err := AGPTraceSummary(read(t, d, x.ready.Trace, AGPTraceBytes), execs)
		if err != nil || p.Execs != execs-1 {
			t.Fatalf("rank %d: trace %+v, %v", r, p, err)
		}
		t.Logf("rank %d: %v", r, p)
	}
	// A done and ready spec that do not belong together are refused.
	bad := rk[0].ready
	bad.Count = rk[1].mem
	if err := ak.DoneReady(rk[0].s, rk[0].done, bad, n); err == nil {
		t.Fatal("DoneReady accepted specs of two counters")
	}
}

// TestAGPOneLaunch runs execs of both one-launch kernels (flagged lines
// for n <= AGPLLMax, one kernel otherwise, and one kernel at small n too)
// and of the split exec (handshake kernels around the copy kernel and a
// copy-engine copy)
// between two ranks on one GPU, with changing data and sizes, in place
// and out of place, and checks every chunk; then a lone rank times out
// with a record naming the missing peer.
func TestAGPOneLaunch(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	ak, err := k.AGP()
	must(t, err)
	const maxN = 256<<10 + 3
	rk := newAGPPair(t, d, maxN)
	rng := rand.New(rand.NewSource(7))
	sizes := []uint64{1, 7, 8, 4096, 65535, AGPLLMax, AGPLLMax + 1, 100003, maxN, 3, 65536}
	for it, n := range sizes {
		for _, mode := range []string{"ll", "one", "split", "staged"} {
			if mode == "ll" && n > AGPLLMax {
				continue
			}
			inPlace := it%2 == 1
			want := make([][]byte, 2)
			srcs := make([]cuda.DevicePtr, 2)
			// Both ranks' sources first: a synchronous copy issued while
			// one rank's kernels wait for the other's could queue behind
			// them (one GPU, one process).
			for r, x := range rk {
				want[r] = make([]byte, n)
				rng.Read(want[r])
				srcs[r] = x.src.Add(1) // an odd source address
				if inPlace {
					srcs[r] = x.data.Add(uint64(r) * n)
				}
				must(t, d.MemcpyHtoD(srcs[r], want[r]))
			}
			must(t, d.DefaultStream().Synchronize())
			for r, x := range rk {
				src := srcs[r]
				if mode == "ll" {
					must(t, ak.LL(x.s, x.ready, x.mem.Add(64), x.stages, x.data, src, n, it%4)) // every variant in turn
				} else if mode == "one" {
					must(t, ak.One(x.s, x.ready, x.done, x.mem.Add(64), x.bases, src, n, 1+it%4))
				} else if mode == "staged" {
					// Parts of 16 bytes, 4 KiB and 64 KiB in turn: grids of
					// one block up to AGPStagedParts.
					partMin := []uint64{16, 4096, 65536}[it%3]
					must(t, ak.Staged(x.s, x.ready, x.mem.Add(64), x.stages, AGPLLStageBytes(2), AGPStagedSlot(maxN), x.data, src, n, partMin, uint64(1+it%40)))
				} else {
					// Ready kernels of both ranks first: streams of one
					// process can share a hardware queue, where a copy
					// waiting behind one rank's spinning kernel would hold
					// back the other rank's.
					must(t, ak.Ready(x.s, x.ready))
				}
			}
			if mode == "split" {
				// The first m bytes per peer and the own chunk by the copy
				// kernel, the rest by the copy engine, then done kernels.
				m := n / 3
				for r, x := range rk {
					must(t, ak.Copy(x.s, uint32(r), 2, x.bases, srcs[r], n, m, 0))
					peer := rk[1-r].data.Add(uint64(r) * n)
					must(t, d.MemcpyAsync(peer.Add(m), srcs[r].Add(m), n-m, x.s))
				}
				for _, x := range rk {
					must(t, ak.Done(x.s, x.done, n))
				}
			}
			for _, x := range rk {
				must(t, x.s.Synchronize())
				must(t, x.c.check(true))
			}
			for r, x := range rk {
				got := read(t, d, x.data, int(2*n))
				for q := 0; q < 2; q++ {
					if !bytes.Equal(got[uint64(q)*n:uint64(q+1)*n], want[q]) {
						t.Fatalf("%s exec n=%d in place %v: rank %d holds a wrong chunk %d", mode, n, inPlace, r, q)
					}
				}
				cnt := read(t, d, x.mem, 80)
				if c, a, tk := u64at(cnt, 0), binary.LittleEndian.Uint32(cnt[64:]), binary.LittleEndian.Uint32(cnt[68:]); a != 0 || tk != 0 {
					t.Fatalf("rank %d: arrivals %d, ticket %d left after the exec (count %d)", r, a, tk, c)
				}
			}
		}
	}
	execs := u64at(read(t, d, rk[0].mem, 8), 0)
	t.Logf("%d execs checked on both ranks", execs)

	// Rank 0 alone: both kernels time out and say who is missing.
	for _, mode := range []string{"ll", "one", "staged"} {
		x := rk[0]
		sp, dn := x.ready, x.done
		sp.Timeout, dn.Timeout = 50*time.Millisecond, 50*time.Millisecond
		if mode == "ll" {
			must(t, ak.LL(x.s, sp, x.mem.Add(64), x.stages, x.data, x.src, 64, 0))
		} else if mode == "staged" {
			must(t, ak.Staged(x.s, sp, x.mem.Add(64), x.stages, AGPLLStageBytes(2), AGPStagedSlot(maxN), x.data, x.src, 64, 16, 0))
		} else {
			must(t, ak.One(x.s, sp, dn, x.mem.Add(64), x.bases, x.src, 64, 0))
		}
		must(t, x.s.Synchronize())
		r := x.c.record()
		if r.Status != StatusTimeout || r.Slot != 1 {
			t.Fatalf("%s alone: record %+v", mode, r)
		}
		t.Logf("%s alone: %+v", mode, r)
		x.c.clear()
	}
	if err := ak.LL(rk[0].s, rk[0].ready, rk[0].mem.Add(64), rk[0].stages, rk[0].data, rk[0].src, AGPLLMax+1, 0); err == nil {
		t.Fatal("LL accepted n > AGPLLMax")
	}
}

// TestAGPSizeMismatch: two ranks run one exec with different n on every
// protocol (flagged lines, one kernel, handshake kernels around copies,
// staged parts);
// each rank's wait sees the other's tag for the same exec with the other n
// and fails at once (StatusMismatch, long before the 10 s timeout), its
// record naming both tags.
func TestAGPSizeMismatch(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	ak, err := k.AGP()
	must(t, err)
	for _, mode := range []string{"ll", "one", "split", "staged"} {
		rk := newAGPPair(t, d, 8192)
		ns := [2]uint64{64, 65}
		if mode != "ll" {
			ns = [2]uint64{4096, 4100}
		}
		for r, x := range rk {
			switch mode {
			case "ll":
				must(t, ak.LL(x.s, x.ready, x.mem.Add(64), x.stages, x.data, x.src, ns[r], 0))
			case "one":
				must(t, ak.One(x.s, x.ready, x.done, x.mem.Add(64), x.bases, x.src, ns[r], 1))
			case "split":
				must(t, ak.Ready(x.s, x.ready))
			case "staged":
				// One part against two: the first part's flag names the
				// other n; the second part's wait ends on the record.
				must(t, ak.Staged(x.s, x.ready, x.mem.Add(64), x.stages, AGPLLStageBytes(2), AGPStagedSlot(8192), x.data, x.src, ns[r], 4096, 0))
			}
		}
		if mode == "split" {
			for r, x := range rk {
				must(t, ak.Done(x.s, x.done, ns[r]))
			}
		}
		for r, x := range rk {
			must(t, x.s.Synchronize())
			rec := x.c.record()
			if rec.Status != StatusMismatch || rec.Slot != uint32(1-r) || rec.Target != AGPTag(1, ns[r]) || rec.Observed != AGPTag(1, ns[1-r]) {
				t.Fatalf("%s: rank %d: record %+v, want a mismatch of tags %#x (ours) and %#x", mode, r, rec, AGPTag(1, ns[r]), AGPTag(1, ns[1-r]))
			}
			if rec.Elapsed > 2*time.Second {
				t.Errorf("%s: rank %d gave up after %v: the timeout, not the tag, ended the wait", mode, r, rec.Elapsed)
			}
			err := x.c.check(true)
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("%s: rank %d: %v is not ErrMismatch", mode, r, err)
			}
		}
	}
}

// TestFusedPutSignalWait runs a host-issued round trip as two fused
// launches on two streams of one GPU: A puts and signals, then waits; B
// waits, then puts and signals back. Both data and both signals land; a
// fused wait that nobody answers times out after its put went out.
func TestFusedPutSignalWait(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	sa, sb := newStream(t, d), newStream(t, d)
	ca, cb := newCtl(t, d), newCtl(t, d)
	const n = 1000
	bufA, bufB := zeroed(t, d, n), zeroed(t, d, n)
	slots := zeroed(t, d, 16) // A's slot, B's slot
	srcA, srcB := alloc(t, d, n), alloc(t, d, n)
	wantA, wantB := bytes.Repeat([]byte{0xA1}, n), bytes.Repeat([]byte{0xB2}, n)
	must(t, d.MemcpyHtoD(srcA, wantA))
	must(t, d.MemcpyHtoD(srcB, wantB))
	must(t, d.DefaultStream().Synchronize())
	// Each launch reports its end in a host-mapped word of its own.
	doneA, err := d.AllocMapped(8)
	must(t, err)
	defer doneA.Free()
	doneB, err := d.AllocMapped(8)
	must(t, err)
	defer doneB.Free()
	for i := uint64(1); i <= 50; i++ {
		wa := WaitSpec{Slots: slots, Count: 1, Cmp: CmpGE, Value: i, Timeout: 5 * time.Second, Abort: ca.abortDev(), Record: ca.recordDev()}
		wb := WaitSpec{Slots: slots.Add(8), Count: 1, Cmp: CmpGE, Value: i, Timeout: 5 * time.Second, Abort: cb.abortDev(), Record: cb.recordDev()}
		// B first: its launch waits for A's signal.
		must(t, k.WaitPutSignal(sb, wb, PutSignalSpec{Dst: bufA, Src: srcB, N: n, Slot: slots, Op: SignalSet, Value: i}, Done{doneB.Dev, 2 * i}))
		must(t, k.PutSignalWait(sa, PutSignalSpec{Dst: bufB, Src: srcA, N: n, Slot: slots.Add(8), Op: SignalSet, Value: i}, wa, Done{doneA.Dev, 3 * i}))
		must(t, sa.Synchronize())
		must(t, sb.Synchronize())
		if a, b := binary.LittleEndian.Uint64(doneA.Bytes()), binary.LittleEndian.Uint64(doneB.Bytes()); a != 3*i || b != 2*i {
			t.Fatalf("exchange %d: done words %d and %d, want %d and %d", i, a, b, 3*i, 2*i)
		}
		must(t, ca.check(true))
		must(t, cb.check(true))
	}
	if got := read(t, d, bufB, n); !bytes.Equal(got, wantA) {
		t.Fatal("A's data did not land in B's buffer")
	}
	if got := read(t, d, bufA, n); !bytes.Equal(got, wantB) {
		t.Fatal("B's data did not land in A's buffer")
	}
	// Nobody answers: the put and signal go out, the wait times out.
	wa := WaitSpec{Slots: slots, Count: 1, Cmp: CmpGE, Value: 100, Timeout: 30 * time.Millisecond, Abort: ca.abortDev(), Record: ca.recordDev()}
	must(t, k.PutSignalWait(sa, PutSignalSpec{Dst: bufB, Src: srcA, N: 8, Slot: slots.Add(8), Op: SignalAdd, Value: 5}, wa, Done{}))
	must(t, sa.Synchronize())
	if r := ca.record(); r.Status != StatusTimeout || r.Target != 100 || r.Observed != 50 {
		t.Fatalf("record %+v", r)
	}
	if v := u64at(read(t, d, slots, 16), 8); v != 55 {
		t.Fatalf("B's slot %d after the add, want 55", v)
	}
	ca.clear()
}

// TestAGPStagedGrid: every rank cuts a chunk into parts that cover it
// exactly once, each a multiple of 16 bytes, never more than asked.
func TestAGPStagedGrid(t *testing.T) {
	for _, n := range []uint64{1, 15, 16, 17, 4095, 4096, 4097, 65536, 100003, 1 << 20, 4<<20 + 5} {
		for _, partMin := range []uint64{0, 16, 4096, 1 << 20} {
			for _, most := range []uint64{0, 1, 7, 32, 1000} {
				parts, part := AGPStagedGrid(n, partMin, most)
				if part%16 != 0 || parts < 1 || parts > max(most, 1) || parts > AGPStagedParts || parts*part < n || (parts-1)*part >= n {
					t.Fatalf("n %d, partMin %d, most %d: %d parts of %d bytes", n, partMin, most, parts, part)
				}
			}
		}
	}
}
