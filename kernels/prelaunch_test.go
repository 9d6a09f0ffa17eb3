package kernels

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// preBlock is host-mapped memory for prelaunched steps: the command block,
// the acknowledgement word and the end report.
type preBlock struct{ m *cuda.MappedMem }

func newPreBlock(t testing.TB, d *cuda.Driver) preBlock {
	t.Helper()
	m, err := d.AllocMapped(PreCmdSize + 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Free() })
	return preBlock{m}
}

func (p preBlock) cmd() (unsafe.Pointer, cuda.DevicePtr) { return p.m.Host, p.m.Dev }
func (p preBlock) ackDev() cuda.DevicePtr                { return p.m.Dev.Add(PreCmdSize) }
func (p preBlock) doneDev() cuda.DevicePtr               { return p.m.Dev.Add(PreCmdSize + 8) }
func (p preBlock) ack() uint64                           { return atomic.LoadUint64((*uint64)(unsafe.Add(p.m.Host, PreCmdSize))) }
func (p preBlock) done() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Add(p.m.Host, PreCmdSize+8)))
}

// spinUntil polls f for up to d.
func spinUntil(d time.Duration, f func() bool) bool {
	until := time.Now().Add(d)
	for !f() {
		if time.Now().After(until) {
			return false
		}
	}
	return true
}

// TestPrelaunched: a prelaunched kernel runs the step written after it was
// enqueued (both orders, the command written before and after the kernel
// starts), returns on a cancel or an abort, and a failed wait records its
// timeout like the fused kernel's.
func TestPrelaunched(t *testing.T) {
	d, k, s, c := kernelsOn(t)
	pb := newPreBlock(t, d)
	host, dev := pb.cmd()
	const n = 1000
	buf := zeroed(t, d, n)
	slots := zeroed(t, d, 16)
	src := alloc(t, d, n)
	want := bytes.Repeat([]byte{0xC3}, n)
	must(t, d.MemcpyHtoD(src, want))
	must(t, d.DefaultStream().Synchronize())
	wait := func(v uint64, timeout time.Duration) WaitSpec {
		return WaitSpec{Slots: slots, Count: 1, Cmp: CmpGE, Value: v, Timeout: timeout, Abort: c.abortDev(), Record: c.recordDev()}
	}
	put := PutSignalSpec{Dst: buf, Src: src, N: n, Slot: slots, Op: SignalAdd, Value: 1}
	gen := uint64(0)
	for i, late := range []bool{false, true, false, true} {
		gen++
		waitFirst := i >= 2
		if waitFirst {
			// The wait needs the slot one ahead: an earlier add stands in
			// for the peer.
			must(t, k.Signal(s, slots.Add(8), SignalAdd, 1))
		}
		must(t, k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()))
		if late {
			time.Sleep(2 * time.Millisecond) // the kernel is polling by now
		}
		w := wait(uint64(i+1), 5*time.Second)
		if waitFirst {
			w.Slots = slots.Add(8)
			w.Value = uint64(i - 1)
		}
		must(t, WritePreCmd(host, gen, waitFirst, put, w, Done{Ptr: pb.doneDev(), Seq: 10 + gen}))
		if !spinUntil(5*time.Second, func() bool { return pb.done() == 10+gen }) {
			t.Fatalf("step %d: no end report (done %d, ack %d)", i, pb.done(), pb.ack())
		}
		must(t, s.Synchronize())
		if pb.ack() != gen {
			t.Fatalf("step %d: ack %d, want %d", i, pb.ack(), gen)
		}
		must(t, c.check(true))
	}
	if got := read(t, d, buf, n); !bytes.Equal(got, want) {
		t.Fatal("the put did not land")
	}
	if v := binary.LittleEndian.Uint64(read(t, d, slots, 8)); v != 4 {
		t.Fatalf("slot %d after 4 adds", v)
	}
	// Cancelled: nothing runs, the stream drains.
	gen++
	must(t, k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()))
	CancelPreCmd(host, gen)
	must(t, s.Synchronize())
	if pb.ack() != gen || pb.done() != 10+gen-1 {
		t.Fatalf("cancel: ack %d done %d", pb.ack(), pb.done())
	}
	if v := binary.LittleEndian.Uint64(read(t, d, slots, 8)); v != 4 {
		t.Fatalf("slot %d after a cancelled step", v)
	}
	// Aborted before any command: the kernel returns.
	gen++
	must(t, k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()))
	c.setAbort()
	must(t, s.Synchronize())
	c.clear()
	if pb.ack() != gen {
		t.Fatalf("abort: ack %d, want %d", pb.ack(), gen)
	}
	// A wait nobody answers times out into the record.
	gen++
	must(t, k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()))
	must(t, WritePreCmd(host, gen, false, put, wait(100, 30*time.Millisecond), Done{}))
	must(t, s.Synchronize())
	if r := c.record(); r.Status != StatusTimeout || r.Target != 100 || r.Observed != 5 {
		t.Fatalf("record %+v", r)
	}
	c.clear()
	// Bad steps are refused before anything is written.
	if err := WritePreCmd(host, gen+1, false, PutSignalSpec{Op: 7}, wait(1, time.Second), Done{}); err == nil {
		t.Fatal("a bad op was accepted")
	}
}

// BenchmarkHostStep compares the two ways the host can start a one-block
// step (an 8-byte put and signal to this GPU's memory, then a wait that
// holds at once) and see it end: launching the fused kernel, or writing
// the command of a kernel prelaunched while the previous step ran. Each
// reports the median time from issue to end report.
func BenchmarkHostStep(b *testing.B) {
	e := needKernels(b)
	d, k := e.d, e.k
	s, err := d.StreamCreate()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	s.SetGraphLaunch(true) // as the rank's stream launches
	defer k.ForgetStream(s)
	c := newCtl(b, d)
	pb := newPreBlock(b, d)
	host, dev := pb.cmd()
	buf, err := d.MemAlloc(64)
	if err != nil {
		b.Fatal(err)
	}
	defer d.MemFree(buf)
	// Generations and end-report numbers only grow, across b.Run's calls.
	var gen, seq uint64
	for _, mode := range []string{"launch", "prelaunch", "queued"} {
		b.Run(mode, func(b *testing.B) {
			// A sub-benchmark runs on a goroutine of its own: the
			// context must be current on its thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			must(b, e.ctx.SetCurrent())
			var samples []time.Duration
			if mode != "launch" {
				gen++
				if err := k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < b.N; i++ {
				if mode == "queued" {
					// The next kernel is enqueued behind this one before
					// this one gets its command, as in a ping-pong.
					gen++
					if err := k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()); err != nil {
						b.Fatal(err)
					}
					gen--
				}
				seq++
				put := PutSignalSpec{Dst: buf, Src: buf.Add(32), N: 8, Slot: buf.Add(16), Op: SignalSet, Value: seq}
				w := WaitSpec{Slots: buf.Add(16), Count: 1, Cmp: CmpGE, Value: seq, Timeout: time.Second, Abort: c.abortDev(), Record: c.recordDev()}
				done := Done{Ptr: pb.doneDev(), Seq: seq}
				t0 := time.Now()
				if mode == "launch" {
					err = k.PutSignalWait(s, put, w, done)
				} else {
					err = WritePreCmd(host, gen, false, put, w, done)
				}
				if mode == "queued" {
					gen++
				}
				if err != nil {
					b.Fatal(err)
				}
				if !spinUntil(time.Second, func() bool { return pb.done() >= seq }) {
					b.Fatalf("step %d: no end report", i)
				}
				samples = append(samples, time.Since(t0))
				if mode == "prelaunch" {
					// The next kernel goes in while nothing is timed, as a
					// helper thread would enqueue it during the step.
					if !spinUntil(time.Second, func() bool { return pb.ack() == gen }) {
						b.Fatal("no ack")
					}
					gen++
					if err := k.Prelaunch(s, dev, gen, pb.ackDev(), c.abortDev()); err != nil {
						b.Fatal(err)
					}
					time.Sleep(20 * time.Microsecond)
				}
			}
			if mode != "launch" {
				CancelPreCmd(host, gen)
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "us-median")
		})
	}
}
