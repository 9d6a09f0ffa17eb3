package kernels

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// GPU tests: skipped without a driver or device.

type env struct {
	d    *cuda.Driver
	ctx  *cuda.Context
	dev  cuda.Device
	arch Arch
	k    *Kernels
}

var loadEnv = sync.OnceValues(func() (*env, error) {
	d, dev, ctx, err := cuda.LoadPrimary(0)
	if err != nil {
		return nil, err
	}
	ma, mi, err := d.DeviceComputeCapability(dev)
	if err != nil {
		return nil, err
	}
	return &env{d: d, ctx: ctx, dev: dev, arch: Arch{ma, mi}}, nil
})

var sharedCacheDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "luacoll-kernels-test-")
	if err != nil {
		panic(err)
	}
	return dir
})

func needGPU(t testing.TB) *env {
	t.Helper()
	e, err := loadEnv()
	if err != nil {
		t.Skipf("no usable CUDA driver/device: %v", err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := e.ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	return e
}

// needKernels also loads the kernel program (once per test binary).
func needKernels(t testing.TB) *env {
	t.Helper()
	e := needGPU(t)
	if e.k == nil {
		nv, err := cuda.LoadNVRTC()
		if err != nil {
			t.Skipf("%v", err)
		}
		nv.Close()
		k, err := Load(e.d, e.ctx, Options{CacheDir: sharedCacheDir()})
		if err != nil {
			t.Fatal(err)
		}
		c := k.Compiled()
		t.Logf("kernels for %s: %d bytes in %d parts, cache hit %v, %v, %s", c.Arch, len(CacheFile(c.Parts)), len(c.Parts), c.CacheHit, c.Took.Round(time.Millisecond), c.Path)
		if c.Log != "" {
			t.Logf("NVRTC log:\n%s", c.Log)
		}
		e.k = k
	}
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func alloc(t *testing.T, d *cuda.Driver, n uint64) cuda.DevicePtr {
	t.Helper()
	p, err := d.MemAlloc(n)
	must(t, err)
	t.Cleanup(func() { _ = d.MemFree(p) })
	return p
}

func zeroed(t *testing.T, d *cuda.Driver, n uint64) cuda.DevicePtr {
	t.Helper()
	p := alloc(t, d, n)
	must(t, d.MemcpyHtoD(p, make([]byte, n)))
	must(t, d.DefaultStream().Synchronize()) // let the DMA land
	return p
}

// kernelsOn is what most tests start with: the driver and kernels (or a
// skip), a stream and the control words of a launch.
func kernelsOn(t *testing.T) (*cuda.Driver, *Kernels, *cuda.Stream, ctl) {
	t.Helper()
	e := needKernels(t)
	return e.d, e.k, newStream(t, e.d), newCtl(t, e.d)
}

func newStream(t *testing.T, d *cuda.Driver) *cuda.Stream {
	t.Helper()
	s, err := d.StreamCreate()
	must(t, err)
	t.Cleanup(func() { _ = s.Destroy() })
	return s
}

// ctl is host-mapped memory holding an abort flag (offset 0) and an error
// record (offset 32).
type ctl struct {
	m *cuda.MappedMem
}

func newCtl(t testing.TB, d *cuda.Driver) ctl {
	t.Helper()
	m, err := d.AllocMapped(64)
	must(t, err)
	t.Cleanup(func() { _ = m.Free() })
	return ctl{m}
}

func (c ctl) abortDev() cuda.DevicePtr  { return c.m.Dev }
func (c ctl) recordDev() cuda.DevicePtr { return c.m.Dev.Add(32) }
func (c ctl) record() Record            { return ReadRecord(unsafe.Add(c.m.Host, 32)) }
func (c ctl) clear()                    { ClearRecord(unsafe.Add(c.m.Host, 32)); SetAbort(c.m.Host, false) }
func (c ctl) setAbort()                 { SetAbort(c.m.Host, true) }
func (c ctl) check(clear bool) error    { return CheckRecord(unsafe.Add(c.m.Host, 32), clear) }
func u64at(b []byte, off int) uint64    { return binary.LittleEndian.Uint64(b[off:]) }
func read(t *testing.T, d *cuda.Driver, p cuda.DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	must(t, d.MemcpyDtoH(b, p))
	return b
}

// replayNs times one launch of reps replays of plan p (its steps, period,
// block and grid; the rest is filled in: a 5 s timeout, c's flag and
// record) on s and returns its time a replay in ns; the launch must not
// fail.
func replayNs(t *testing.T, e *env, s *cuda.Stream, c ctl, p PlanSpec, reps uint64) float64 {
	t.Helper()
	p.Count, p.Timeout, p.Abort, p.Record = uint64(p.Period)*reps, 5*time.Second, c.abortDev(), c.recordDev()
	dt := timeIt(t, e.d, s, func() { must(t, e.k.Plan(s, p)) })
	must(t, c.check(true))
	return float64(dt.Nanoseconds()) / float64(reps)
}

func timeIt(t *testing.T, d *cuda.Driver, s *cuda.Stream, f func()) time.Duration {
	t.Helper()
	e0, err := d.NewTimingEvent()
	must(t, err)
	e1, err := d.NewTimingEvent()
	must(t, err)
	defer e0.Destroy()
	defer e1.Destroy()
	must(t, e0.Record(s))
	f()
	must(t, e1.Record(s))
	must(t, e1.Synchronize())
	ms, err := e0.ElapsedMs(e1)
	must(t, err)
	return time.Duration(float64(ms) * 1e6)
}

func TestCompileCache(t *testing.T) {
	e := needGPU(t)
	nv, err := cuda.LoadNVRTC()
	if err != nil {
		t.Skip(err)
	}
	defer nv.Close()
	ma, mi := nv.Version()
	dir := t.TempDir()
	c1, err := Compile(nv, e.arch, dir)
	must(t, err)
	c2, err := Compile(nv, e.arch, dir)
	must(t, err)
	f1, f2 := CacheFile(c1.Parts), CacheFile(c2.Parts)
	if c1.CacheHit || !c2.CacheHit || !bytes.Equal(f1, f2) || c1.Path != CachePath(dir, e.arch) {
		t.Fatalf("first hit=%v second hit=%v same=%v path=%s", c1.CacheHit, c2.CacheHit, bytes.Equal(f1, f2), c1.Path)
	}
	t.Logf("MEASURED NVRTC %d.%d compile for %s: %v (%d bytes in %d parts); cache hit: %v", ma, mi, e.arch, c1.Took.Round(time.Millisecond), len(f1), len(c1.Parts), c2.Took)
	// Every kernel is in exactly one part, and the parts' unused copies of
	// the others draw no warning.
	checkParts(t, c1.Parts)
	if strings.Contains(c1.Log, "never referenced") {
		t.Errorf("NVRTC warns of unused kernels:\n%s", c1.Log)
	}
	// A truncated cache file is detected and rebuilt.
	must(t, os.WriteFile(c1.Path, f1[:len(f1)/2], 0o644))
	c3, err := Compile(nv, e.arch, dir)
	must(t, err)
	if c3.CacheHit || !bytes.Equal(CacheFile(c3.Parts), f1) {
		t.Fatal("corrupt cache file was used")
	}
	k, err := Load(e.d, e.ctx, Options{CacheDir: dir, NVRTC: nv})
	must(t, err)
	defer k.Close()
	if !k.Compiled().CacheHit {
		t.Fatal("Load did not use the cache")
	}
}

func TestPut(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	const m = 1<<20 + 64
	src, dst := alloc(t, d, m), alloc(t, d, m)
	must(t, k.FillRand(s, src, m, 77))
	must(t, s.Synchronize())
	srcHost := read(t, d, src, m)
	combos := 0
	for _, n := range []uint64{0, 1, 3, 15, 16, 17, 31, 100, 4095, 4096, 65537, 1 << 20} {
		for _, so := range []uint64{0, 1, 3, 8, 15} {
			for _, do := range []uint64{0, 5, 8, 16} {
				must(t, k.FillByte(s, dst, m, 0xEE))
				must(t, k.Put(s, dst.Add(do), src.Add(so), n))
				must(t, s.Synchronize())
				got := read(t, d, dst, m)
				want := bytes.Repeat([]byte{0xEE}, m)
				copy(want[do:do+n], srcHost[so:so+n])
				if !bytes.Equal(got, want) {
					t.Fatalf("put n=%d srcOff=%d dstOff=%d: wrong bytes", n, so, do)
				}
				combos++
			}
		}
	}
	t.Logf("put verified for %d size/offset combinations", combos)

	const big = 256 << 20
	a, b := alloc(t, d, big+16), alloc(t, d, big+16)
	must(t, k.FillByte(s, a, big+16, 1))
	for _, c := range []struct {
		name   string
		so, do uint64
	}{{"aligned", 0, 0}, {"src+8", 8, 0}, {"src+1", 1, 0}} {
		must(t, k.Put(s, b.Add(c.do), a.Add(c.so), big)) // warm-up
		dt := timeIt(t, d, s, func() {
			for range 10 {
				must(t, k.Put(s, b.Add(c.do), a.Add(c.so), big))
			}
		})
		t.Logf("MEASURED put 256 MiB %s: %.3f ms, %.0f GB/s (read+write)", c.name, dt.Seconds()*100, 2*big*10/dt.Seconds()/1e9)
	}
	dt := timeIt(t, d, s, func() {
		for range 10 {
			must(t, d.MemcpyAsync(b, a, big, s))
		}
	})
	t.Logf("MEASURED cuMemcpyAsync 256 MiB for comparison: %.0f GB/s", 2*big*10/dt.Seconds()/1e9)
	small := timeIt(t, d, s, func() {
		for range 1000 {
			must(t, k.Put(s, b, a, 64))
		}
	})
	t.Logf("MEASURED put 64 B back-to-back: %.2f us each", small.Seconds()*1e6/1000)
}

func TestSignal(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	slot := zeroed(t, d, 8)
	must(t, k.Signal(s, slot, SignalSet, 42))
	must(t, k.Signal(s, slot, SignalAdd, 5))
	must(t, k.Signal(s, slot, SignalAdd, 1<<40))
	must(t, s.Synchronize())
	if v := u64at(read(t, d, slot, 8), 0); v != 47+1<<40 {
		t.Fatalf("slot = %d", v)
	}
	if err := k.Signal(s, slot, SignalOp(9), 1); err == nil {
		t.Fatal("bad op accepted")
	}
	dt := timeIt(t, d, s, func() {
		for range 1000 {
			must(t, k.Signal(s, slot, SignalAdd, 1))
		}
	})
	if v := u64at(read(t, d, slot, 8), 0); v != 1047+1<<40 {
		t.Fatalf("slot after 1000 adds = %d", v)
	}
	t.Logf("MEASURED signal kernel back-to-back: %.2f us each", dt.Seconds()*1e6/1000)
}

func TestCounterAdd(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	c := zeroed(t, d, 8)
	for i := uint64(1); i <= 10; i++ {
		must(t, k.CounterAdd(s, c, i))
	}
	must(t, s.Synchronize())
	if v := u64at(read(t, d, c, 8), 0); v != 55 {
		t.Fatalf("counter = %d", v)
	}
}

func TestWaitSuccess(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	waiter, signaler := newStream(t, d), newStream(t, d)
	c := newCtl(t, d)
	// Three slots 16 bytes apart; the wait is on their sum.
	slots := zeroed(t, d, 48)
	w := WaitSpec{Slots: slots, Count: 3, Stride: 16, Cmp: CmpEQ, Value: 6, Timeout: 5 * time.Second, Abort: c.abortDev(), Record: c.recordDev()}
	must(t, k.Wait(waiter, w))
	time.Sleep(10 * time.Millisecond)
	if done, _ := waiter.Query(); done {
		t.Fatal("wait finished before any signal")
	}
	must(t, k.Signal(signaler, slots, SignalAdd, 1))
	must(t, k.Signal(signaler, slots.Add(16), SignalAdd, 2))
	must(t, signaler.Synchronize())
	time.Sleep(5 * time.Millisecond)
	if done, _ := waiter.Query(); done {
		t.Fatal("wait finished at sum 3")
	}
	t0 := time.Now()
	must(t, k.Signal(signaler, slots.Add(32), SignalAdd, 3))
	must(t, waiter.Synchronize())
	t.Logf("MEASURED host-observed signal->wait completion: %v", time.Since(t0))
	must(t, c.check(true))
	// Every comparison, each satisfied by the current sum 6.
	for _, cmp := range []struct {
		c Cmp
		v uint64
	}{{CmpEQ, 6}, {CmpNE, 5}, {CmpLT, 7}, {CmpLE, 6}, {CmpGT, 5}, {CmpGE, 6}} {
		w.Cmp, w.Value, w.Timeout = cmp.c, cmp.v, time.Second
		must(t, k.Wait(waiter, w))
		must(t, waiter.Synchronize())
		if err := c.check(true); err != nil {
			t.Fatalf("6 %v %d: %v", cmp.c, cmp.v, err)
		}
	}
	if err := k.Wait(waiter, WaitSpec{Slots: slots, Count: 0}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("count 0: %v", err)
	}
	// Round trip through the device: signal on one stream, wait on the
	// other, alternating, timed with events.
	a, b := zeroed(t, d, 8), zeroed(t, d, 8)
	const iters = 500
	dt := timeIt(t, d, signaler, func() {
		for i := uint64(1); i <= iters; i++ {
			must(t, k.Signal(signaler, a, SignalSet, i))
			must(t, k.Wait(waiter, WaitSpec{Slots: a, Count: 1, Cmp: CmpGE, Value: i, Timeout: 5 * time.Second, Record: c.recordDev()}))
			must(t, k.Signal(waiter, b, SignalSet, i))
			must(t, k.Wait(signaler, WaitSpec{Slots: b, Count: 1, Cmp: CmpGE, Value: i, Timeout: 5 * time.Second, Record: c.recordDev()}))
		}
	})
	must(t, c.check(true))
	t.Logf("MEASURED signal/wait kernel ping-pong between two streams: %.2f us per round trip", dt.Seconds()*1e6/iters)
}

func TestWaitTimeout(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	slot := zeroed(t, d, 8)
	const timeout = 50 * time.Millisecond
	t0 := time.Now()
	must(t, k.Wait(s, WaitSpec{Slots: slot, Count: 1, Cmp: CmpGE, Value: 1, Timeout: timeout, Abort: c.abortDev(), Record: c.recordDev()}))
	must(t, s.Synchronize())
	wall := time.Since(t0)
	r := c.record()
	if r.Status != StatusTimeout || r.Observed != 0 || r.Target != 1 || r.Slot != 0 || r.Elapsed < timeout {
		t.Fatalf("record %+v", r)
	}
	if wall < timeout || wall > timeout+500*time.Millisecond {
		t.Fatalf("wait returned after %v for a %v timeout", wall, timeout)
	}
	t.Logf("MEASURED timeout %v: device elapsed %v, host wall %v; record %+v", timeout, r.Elapsed, wall.Round(time.Microsecond), r)
	// The failed record poisons the next wait: it returns at once.
	t0 = time.Now()
	must(t, k.Wait(s, WaitSpec{Slots: slot, Count: 1, Cmp: CmpGE, Value: 1, Timeout: 10 * time.Second, Record: c.recordDev()}))
	must(t, s.Synchronize())
	if dt := time.Since(t0); dt > time.Second {
		t.Fatalf("poisoned wait took %v", dt)
	}
	err := c.check(true)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	t.Logf("error text: %v", err)
}

func TestWaitAbort(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	slot := zeroed(t, d, 8)
	must(t, k.Wait(s, WaitSpec{Slots: slot, Count: 1, Cmp: CmpGE, Value: 1, Timeout: 10 * time.Second, Abort: c.abortDev(), Record: c.recordDev()}))
	time.Sleep(30 * time.Millisecond)
	if done, _ := s.Query(); done {
		t.Fatalf("wait returned before abort: %+v", c.record())
	}
	t0 := time.Now()
	c.setAbort()
	must(t, s.Synchronize())
	lat := time.Since(t0)
	r := c.record()
	if r.Status != StatusAborted || r.Target != 1 {
		t.Fatalf("record %+v", r)
	}
	if lat > time.Second {
		t.Fatalf("abort took %v", lat)
	}
	if !errors.Is(c.check(true), ErrAborted) {
		t.Fatal("not ErrAborted")
	}
	c.clear()
	t.Logf("MEASURED abort via host-mapped flag: wait returned %v after the flag was set; record %+v", lat, r)
}

func TestBarrier(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	c0, c1 := newCtl(t, d), newCtl(t, d)
	// Two ranks simulated in one process: two slot rows of two slots, two
	// epoch counters, one pointer table (both ranks see the same addresses).
	rows := zeroed(t, d, 32)
	epochs := zeroed(t, d, 16)
	table := alloc(t, d, 16)
	tb := make([]byte, 16)
	binary.LittleEndian.PutUint64(tb, uint64(rows))
	binary.LittleEndian.PutUint64(tb[8:], uint64(rows.Add(16)))
	must(t, d.MemcpyHtoD(table, tb))
	must(t, d.DefaultStream().Synchronize()) // let the DMA land
	spec := func(rank uint32, c ctl) BarrierSpec {
		return BarrierSpec{Epoch: epochs.Add(8 * uint64(rank)), Rows: table, Rank: rank, Size: 2,
			Timeout: 5 * time.Second, Abort: c.abortDev(), Record: c.recordDev()}
	}
	// Skewed arrival: rank 0 must wait for rank 1.
	must(t, k.Barrier(s0, spec(0, c0)))
	time.Sleep(20 * time.Millisecond)
	if done, _ := s0.Query(); done {
		t.Fatal("rank 0 left the barrier alone")
	}
	must(t, k.Barrier(s1, spec(1, c1)))
	must(t, s0.Synchronize())
	must(t, s1.Synchronize())
	must(t, c0.check(true))
	must(t, c1.check(true))

	const iters = 1000
	t0 := time.Now()
	dt := timeIt(t, d, s0, func() {
		for range iters {
			must(t, k.Barrier(s0, spec(0, c0)))
			must(t, k.Barrier(s1, spec(1, c1)))
		}
	})
	must(t, s1.Synchronize())
	wall := time.Since(t0)
	must(t, c0.check(true))
	must(t, c1.check(true))
	ep := read(t, d, epochs, 16)
	if u64at(ep, 0) != iters+1 || u64at(ep, 8) != iters+1 {
		t.Fatalf("epochs %d %d", u64at(ep, 0), u64at(ep, 8))
	}
	t.Logf("MEASURED 2-rank barrier (one GPU, two streams): %.2f us each (device), %v wall for %d", dt.Seconds()*1e6/iters, wall.Round(time.Millisecond), iters)

	// Rank 0 alone times out, naming rank 1 as the missing peer.
	spec0 := spec(0, c0)
	spec0.Timeout = 50 * time.Millisecond
	must(t, k.Barrier(s0, spec0))
	must(t, s0.Synchronize())
	r := c0.record()
	if r.Status != StatusTimeout || r.Slot != 1 || r.Target != iters+2 || r.Observed != iters+1 {
		t.Fatalf("record %+v", r)
	}
	t.Logf("barrier timeout record: %+v", r)
	if err := k.Barrier(s0, BarrierSpec{Rank: 2, Size: 2}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("rank out of range: %v", err)
	}
}

func TestFillChecksumEqual(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	const n = 1<<20 + 5
	buf, cp := alloc(t, d, n+64), alloc(t, d, n+64)
	out := alloc(t, d, 16)
	for _, off := range []uint64{0, 3, 8} {
		must(t, k.FillRand(s, buf.Add(off), n, 1234+off))
		must(t, s.Synchronize())
		want := make([]byte, n)
		FillRand(want, 1234+off)
		if got := read(t, d, buf.Add(off), n); !bytes.Equal(got, want) {
			t.Fatalf("fill rand at offset %d differs from the host reference", off)
		}
		for _, m := range []uint64{0, 1, 7, 8, 9, 4096, n} {
			must(t, k.Checksum(s, buf.Add(off), m, out))
			must(t, s.Synchronize())
			if got, ref := u64at(read(t, d, out, 8), 0), Checksum(want[:m]); got != ref {
				t.Fatalf("checksum offset %d len %d: device %#x host %#x", off, m, got, ref)
			}
		}
		for _, off2 := range []uint64{0, 5} {
			must(t, k.Put(s, cp.Add(off2), buf.Add(off), n))
			must(t, k.Equal(s, cp.Add(off2), buf.Add(off), n, out))
			must(t, s.Synchronize())
			if v := u64at(read(t, d, out, 8), 0); v != 0 {
				t.Fatalf("equal copies differ in %d bytes", v)
			}
			for _, pos := range []uint64{0, 777, n - 1} {
				must(t, d.MemcpyHtoD(cp.Add(off2+pos), []byte{^want[pos]}))
				must(t, d.DefaultStream().Synchronize()) // let the DMA land
			}
			must(t, k.Equal(s, cp.Add(off2), buf.Add(off), n, out))
			must(t, s.Synchronize())
			if v := u64at(read(t, d, out, 8), 0); v != 3 {
				t.Fatalf("equal (offsets %d/%d) counted %d differences, want 3", off2, off, v)
			}
		}
	}
	// Byte fill with guards, iota.
	must(t, k.FillByte(s, buf, 64, 0))
	must(t, k.FillByte(s, buf.Add(1), 1000, 0xAB))
	must(t, k.FillIota32(s, cp, 1000, 0xFFFFFFF0))
	must(t, s.Synchronize())
	got := read(t, d, buf, 1002)
	if got[0] != 0 || got[1001] == 0xAB || !bytes.Equal(got[1:1001], bytes.Repeat([]byte{0xAB}, 1000)) {
		t.Fatal("fill byte wrong or overran")
	}
	iota := read(t, d, cp, 4000)
	for i := 0; i < 1000; i++ {
		if v := binary.LittleEndian.Uint32(iota[4*i:]); v != 0xFFFFFFF0+uint32(i) {
			t.Fatalf("iota[%d] = %#x", i, v)
		}
	}
	if err := k.FillIota32(s, cp.Add(2), 1, 0); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("misaligned iota: %v", err)
	}
	// Checksum throughput.
	const big = 256 << 20
	p := alloc(t, d, big)
	must(t, k.FillRand(s, p, big, 9))
	must(t, k.Checksum(s, p, big, out))
	dt := timeIt(t, d, s, func() {
		for range 10 {
			must(t, k.Checksum(s, p, big, out))
		}
	})
	t.Logf("MEASURED checksum 256 MiB: %.0f GB/s", big*10/dt.Seconds()/1e9)
}

func TestPingPong(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	flags := zeroed(t, d, 256)
	out := zeroed(t, d, 16)
	f0, f1 := flags, flags.Add(128)
	const iters = 10000
	must(t, k.PingPong(s1, f1, f0, iters, false, 10*time.Second, out.Add(8)))
	must(t, k.PingPong(s0, f0, f1, iters, true, 10*time.Second, out))
	must(t, s0.Synchronize())
	must(t, s1.Synchronize())
	o := read(t, d, out, 16)
	ns := u64at(o, 0)
	if ns == ^uint64(0) || u64at(o, 8) == ^uint64(0) {
		t.Fatal("ping-pong timed out")
	}
	t.Logf("MEASURED raw flag ping-pong (one GPU, two 1-thread kernels, device memory): %.0f ns per round trip", float64(ns)/iters)
}

// Each correct ordering of the put_signal ping-pong (system scope 0, 4 and
// 11, GPU scope 7, 9 and 10) completes with the payload in place, and the device
// barrier loop completes with its rows found by table (variants 6, 8) and
// by arithmetic in a flat range (rows NULL, base + p*stride).
func TestPutSignalPingPongAndBarrierVariants(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s0, s1 := newStream(t, d), newStream(t, d)
	const iters = 2000
	for _, v := range []int{0, 4, 7, 9, 10, 11} {
		mem := zeroed(t, d, 1024)
		out := zeroed(t, d, 16)
		src0, src1 := mem.Add(512), mem.Add(520)
		data0, data1 := mem.Add(256), mem.Add(264) // rank 0's and rank 1's payload landing
		slot0, slot1 := mem, mem.Add(128)
		put := func(p cuda.DevicePtr, v uint64) {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			must(t, d.MemcpyHtoD(p, b[:]))
		}
		put(src0, 0x1111)
		put(src1, 0x2222)
		must(t, k.PutSignalPingPong(s1, data0, src1, 8, slot0, slot1, iters, false, 10*time.Second, out.Add(8), v))
		must(t, k.PutSignalPingPong(s0, data1, src0, 8, slot1, slot0, iters, true, 10*time.Second, out, v))
		must(t, s0.Synchronize())
		must(t, s1.Synchronize())
		o := read(t, d, out, 16)
		if u64at(o, 0) == ^uint64(0) || u64at(o, 8) == ^uint64(0) {
			t.Fatalf("variant %d: ping-pong timed out", v)
		}
		got := read(t, d, data0, 16)
		if u64at(got, 0) != 0x2222 || u64at(got, 8) != 0x1111 {
			t.Fatalf("variant %d: payloads %#x %#x", v, u64at(got, 0), u64at(got, 8))
		}
		t.Logf("MEASURED put_signal ping-pong variant %d: %.0f ns per round trip", v, float64(u64at(o, 0))/iters)
	}
	// The line ping-pong: each payload arrives with its flag, lands in the
	// receiver's data and the round in its slot.
	{
		mem := zeroed(t, d, 1024)
		out := zeroed(t, d, 16)
		src0, src1 := mem.Add(512), mem.Add(520)
		data0, data1 := mem.Add(256), mem.Add(264)
		slot0, slot1 := mem, mem.Add(128)
		line0, line1 := mem.Add(640), mem.Add(656)
		var b [16]byte
		binary.LittleEndian.PutUint64(b[0:], 0x1111_0000_aaaa)
		binary.LittleEndian.PutUint64(b[8:], 0x2222_0000_bbbb)
		must(t, d.MemcpyHtoD(src0, b[:]))
		must(t, k.PutSignalPingPongLL(s1, line0, line1, data1, src1, slot1, iters, false, 10*time.Second, out.Add(8)))
		must(t, k.PutSignalPingPongLL(s0, line1, line0, data0, src0, slot0, iters, true, 10*time.Second, out))
		must(t, s0.Synchronize())
		must(t, s1.Synchronize())
		o := read(t, d, out, 16)
		if u64at(o, 0) == ^uint64(0) || u64at(o, 8) == ^uint64(0) {
			t.Fatal("line ping-pong timed out")
		}
		got := read(t, d, mem, 1024)
		if u64at(got, 256) != 0x2222_0000_bbbb || u64at(got, 264) != 0x1111_0000_aaaa {
			t.Fatalf("line ping-pong: payloads %#x %#x", u64at(got, 256), u64at(got, 264))
		}
		if u64at(got, 0) != iters || u64at(got, 128) != iters {
			t.Fatalf("line ping-pong: slots %d %d, want %d", u64at(got, 0), u64at(got, 128), iters)
		}
		if err := k.PutSignalPingPongLL(s0, line1.Add(8), line0, data0, src0, slot0, 1, true, time.Second, out); err == nil {
			t.Fatal("a line off 16-byte alignment was accepted")
		}
		t.Logf("MEASURED line ping-pong: %.0f ns per round trip", float64(u64at(o, 0))/iters)
	}
	// Two ranks' rows of two slots, 4096 bytes apart.
	const stride = 4096
	for _, c := range []struct {
		variant int
		flat    bool
	}{{6, false}, {8, false}, {6, true}, {8, true}} {
		rows := zeroed(t, d, 2*stride)
		out := zeroed(t, d, 16)
		var table, base cuda.DevicePtr
		if !c.flat {
			table = zeroed(t, d, 16)
			var b [16]byte
			binary.LittleEndian.PutUint64(b[0:], uint64(rows))
			binary.LittleEndian.PutUint64(b[8:], uint64(rows.Add(stride)))
			must(t, d.MemcpyHtoD(table, b[:]))
		} else {
			base = rows
		}
		must(t, k.BarrierLoop(s1, table, base, stride, 1, 2, iters, 10*time.Second, out.Add(8), c.variant))
		must(t, k.BarrierLoop(s0, table, base, stride, 0, 2, iters, 10*time.Second, out, c.variant))
		must(t, s0.Synchronize())
		must(t, s1.Synchronize())
		o := read(t, d, out, 16)
		if u64at(o, 0) == ^uint64(0) || u64at(o, 8) == ^uint64(0) {
			t.Fatalf("barrier variant %d flat %v: timed out", c.variant, c.flat)
		}
		r := read(t, d, rows, 2*stride)
		// Each rank wrote the last epoch into its slot of the other's row.
		for _, off := range []int{8, stride} {
			if u64at(r, off) != iters {
				t.Fatalf("barrier variant %d flat %v: slot at %d holds %d", c.variant, c.flat, off, u64at(r, off))
			}
		}
	}
}

// vmmAlias creates size bytes of VMM memory mapped twice: local through the
// allocation's own handle, remote through a handle re-imported from its
// exported file descriptor, as a peer rank would map it.
func vmmAlias(t *testing.T, e *env, size uint64) (local, remote cuda.DevicePtr) {
	t.Helper()
	d := e.d
	gran, err := d.MemGetAllocationGranularity(e.dev, cuda.GranularityRecommended)
	must(t, err)
	size = (size + gran - 1) / gran * gran
	h, err := d.MemCreate(e.dev, size)
	must(t, err)
	fd, err := d.MemExportToFD(h)
	must(t, err)
	h2, err := d.MemImportFromFD(fd)
	must(t, err)
	must(t, syscall.Close(fd))
	for _, m := range []struct {
		p *cuda.DevicePtr
		h cuda.MemHandle
	}{{&local, h}, {&remote, h2}} {
		va, err := d.MemAddressReserve(size, gran)
		must(t, err)
		must(t, d.MemMap(va, size, 0, m.h))
		must(t, d.MemSetAccess(va, size, e.dev))
		*m.p = va
	}
	t.Cleanup(func() {
		for _, va := range []cuda.DevicePtr{local, remote} {
			_ = d.MemUnmap(va, size)
			_ = d.MemAddressFree(va, size)
		}
		_ = d.MemRelease(h2)
		_ = d.MemRelease(h)
	})
	must(t, d.MemcpyHtoD(local, make([]byte, size)))
	must(t, d.DefaultStream().Synchronize()) // let the DMA land
	return local, remote
}

// TestOneSidedOverVMM runs put, signal, wait, equal and barrier through
// VMM mappings that alias each other, the way two ranks on different GPUs
// see each other's windows (here both on one GPU).
func TestOneSidedOverVMM(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	if v, _ := d.DeviceAttribute(e.dev, cuda.AttrHandleTypePosixFDSupported); v == 0 || !d.Has("cuMemCreate") {
		t.Skip("no VMM with POSIX FD handles")
	}
	const data = 8 << 20
	// Window of rank 1: data, then a signal slot, then its barrier row.
	win1, win1AtRank0 := vmmAlias(t, e, data+4096)
	win0, win0AtRank1 := vmmAlias(t, e, 4096)
	s0, s1 := newStream(t, d), newStream(t, d)
	c0, c1 := newCtl(t, d), newCtl(t, d)
	src := alloc(t, d, data)
	must(t, k.FillRand(s0, src, data, 2024))
	sig := uint64(data)

	// Rank 1 waits for the signal; rank 0 puts then signals, both through
	// rank 0's mapping of rank 1's window.
	must(t, k.Wait(s1, WaitSpec{Slots: win1.Add(sig), Count: 1, Cmp: CmpGE, Value: 1, Timeout: 5 * time.Second, Abort: c1.abortDev(), Record: c1.recordDev()}))
	must(t, k.Put(s0, win1AtRank0, src, data))
	must(t, k.Signal(s0, win1AtRank0.Add(sig), SignalAdd, 1))
	out := alloc(t, d, 8)
	must(t, k.Equal(s1, win1, src, data, out))
	must(t, s0.Synchronize())
	must(t, s1.Synchronize())
	must(t, c1.check(true))
	if v := u64at(read(t, d, out, 8), 0); v != 0 {
		t.Fatalf("rank 1 sees %d differing bytes after put+signal", v)
	}

	// Barrier: rows at offset 2048 of each window (plus 0 of win0's page),
	// each rank's table lists its own row locally and the peer's through
	// its mapping.
	row0, row0At1 := win0.Add(2048), win0AtRank1.Add(2048)
	row1, row1At0 := win1.Add(sig+2048), win1AtRank0.Add(sig+2048)
	tables := alloc(t, d, 32)
	tb := make([]byte, 32)
	binary.LittleEndian.PutUint64(tb[0:], uint64(row0))
	binary.LittleEndian.PutUint64(tb[8:], uint64(row1At0))
	binary.LittleEndian.PutUint64(tb[16:], uint64(row0At1))
	binary.LittleEndian.PutUint64(tb[24:], uint64(row1))
	must(t, d.MemcpyHtoD(tables, tb))
	must(t, d.DefaultStream().Synchronize()) // let the DMA land
	epochs := zeroed(t, d, 16)
	for range 100 {
		must(t, k.Barrier(s0, BarrierSpec{Epoch: epochs, Rows: tables, Rank: 0, Size: 2, Timeout: 5 * time.Second, Record: c0.recordDev()}))
		must(t, k.Barrier(s1, BarrierSpec{Epoch: epochs.Add(8), Rows: tables.Add(16), Rank: 1, Size: 2, Timeout: 5 * time.Second, Record: c1.recordDev()}))
	}
	must(t, s0.Synchronize())
	must(t, s1.Synchronize())
	must(t, c0.check(true))
	must(t, c1.check(true))
	r0, r1 := read(t, d, row0, 16), read(t, d, row1, 16)
	if u64at(r0, 0) != 100 || u64at(r0, 8) != 100 || u64at(r1, 0) != 100 || u64at(r1, 8) != 100 {
		t.Fatalf("rows after 100 barriers: %v %v", r0, r1)
	}
	t.Log("put/signal/wait/equal and 100 barriers verified through aliased VMM mappings")
}

// uploadPlan is steps' table in device memory, freed when t ends.
func uploadPlan(t *testing.T, d *cuda.Driver, steps []PlanStep) cuda.DevicePtr {
	t.Helper()
	p := alloc(t, d, uint64(len(steps))*PlanStepSize)
	must(t, d.MemcpyHtoD(p, EncodePlan(steps)))
	must(t, d.DefaultStream().Synchronize()) // let the DMA land
	return p
}

// runReplays runs iters replays of steps in one launch on s, with blocks of
// threads (0: the default), and fails t unless every wait was met.
func runReplays(t *testing.T, d *cuda.Driver, k *Kernels, s *cuda.Stream, c ctl, steps []PlanStep, iters uint64, threads uint32) {
	t.Helper()
	table := uploadPlan(t, d, steps)
	p := uint32(len(steps))
	must(t, k.Plan(s, PlanSpec{Steps: table, Period: p, Count: uint64(p) * iters, Timeout: 5 * time.Second,
		Abort: c.abortDev(), Record: c.recordDev(), Threads: threads}))
	must(t, s.Synchronize())
	must(t, c.check(true))
}

func TestPutMulti(t *testing.T) {
	e := needKernels(t)
	d, k := e.d, e.k
	s := newStream(t, d)
	const m = 1<<20 + 64
	src := alloc(t, d, m)
	must(t, k.FillRand(s, src, m, 78))
	must(t, s.Synchronize())
	srcHost := read(t, d, src, m)
	var dsts []cuda.DevicePtr
	for range PutMultiMax {
		dsts = append(dsts, alloc(t, d, m))
	}
	for _, places := range []int{2, 3, 7, PutMultiMax} {
		for _, n := range []uint64{1, 17, 4096, 65537, 1 << 20} {
			for _, off := range [][2]uint64{{0, 0}, {1, 0}, {8, 16}, {3, 5}} {
				so, do := off[0], off[1]
				to := make([]cuda.DevicePtr, places)
				for i := range to {
					must(t, k.FillByte(s, dsts[i], m, 0xEE))
					to[i] = dsts[i].Add(do + uint64(i)%2) // two alignments among the places
				}
				must(t, k.PutMulti(s, to, src.Add(so), n))
				must(t, s.Synchronize())
				for i := range to {
					o := do + uint64(i)%2
					want := bytes.Repeat([]byte{0xEE}, m)
					copy(want[o:o+n], srcHost[so:so+n])
					if !bytes.Equal(read(t, d, dsts[i], m), want) {
						t.Fatalf("put to %d places, n=%d src+%d dst+%d: place %d has wrong bytes", places, n, so, o, i)
					}
				}
			}
		}
	}
}
