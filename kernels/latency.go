package kernels

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// Names of the latency kernels (signal_put.cu).
const (
	KernelPutSignal     = "lc_put_signal"
	KernelPPPutSignal   = "lc_pp_put_signal"
	KernelPPPutSignalLL = "lc_pp_put_signal_ll"
	KernelBarrierLoop   = "lc_barrier_loop"
	PutSignalMaxThreads = 512
)

// PutSignal copies n bytes from src to dst with one block, then signals
// slot (set or add) once every byte is visible system-wide: a put_signal in
// one launch, for small transfers.
func (k *Kernels) PutSignal(s *cuda.Stream, dst, src cuda.DevicePtr, n uint64, slot cuda.DevicePtr, op SignalOp, value uint64) error {
	if op != SignalSet && op != SignalAdd {
		return fmt.Errorf("put_signal: unknown op %d", op)
	}
	var a cuda.KernelArgs
	PutSignalSpec{Dst: dst, Src: src, N: n, Slot: slot, Op: op, Value: value}.push(&a)
	return k.launch(KernelPutSignal, 1, putSignalThreads(n), s, &a)
}

// Names of the fused kernels (sync_fused.cu).
const (
	KernelPutSignalWait = "lc_put_signal_wait"
	KernelWaitPutSignal = "lc_wait_put_signal"
)

// PutSignalSpec is a put + signal for the fused launches: n bytes from Src
// to Dst, then Op with Value on Slot.
type PutSignalSpec struct {
	Dst, Src cuda.DevicePtr
	N        uint64
	Slot     cuda.DevicePtr
	Op       SignalOp
	Value    uint64
}

func putSignalThreads(n uint64) uint32 {
	threads := uint32(PutSignalMaxThreads)
	if n/16 < uint64(threads) {
		threads = uint32((n/16 + 31) / 32 * 32)
		if threads == 0 {
			threads = 32
		}
	}
	return threads
}

func (p PutSignalSpec) push(a *cuda.KernelArgs) {
	a.Ptr(p.Dst).Ptr(p.Src).U64(p.N).Ptr(p.Slot).U64(p.Value).I32(int32(p.Op))
}

func (w *WaitSpec) check(what string) error {
	if w.Count == 0 || w.Stride%8 != 0 || w.Slots%8 != 0 || w.Cmp < CmpEQ || w.Cmp > CmpGE {
		return fmt.Errorf("%s(slots %#x, count %d, stride %d, cmp %v): %w", what, uint64(w.Slots), w.Count, w.Stride, w.Cmp, ErrBadSpec)
	}
	if w.Stride == 0 {
		w.Stride = 8
	}
	return nil
}

func (w WaitSpec) push(a *cuda.KernelArgs) {
	a.Ptr(w.Slots).U32(w.Count).U64(w.Stride).I32(int32(w.Cmp)).U64(w.Value).U64(nanos(w.Timeout)).Ptr(w.Abort).Ptr(w.Record)
}

// Done is where a fused launch reports that it has finished: its last
// act stores Seq into the host-mapped 64-bit word at Ptr with a
// system-scope release (Ptr 0: no report).
type Done struct {
	Ptr cuda.DevicePtr
	Seq uint64
}

// PutSignalWait enqueues a put + signal and then a wait in one launch:
// the wait starts once the signal is out, as two launches in a row would.
func (k *Kernels) PutSignalWait(s *cuda.Stream, p PutSignalSpec, w WaitSpec, done Done) error {
	return k.fused(s, KernelPutSignalWait, p, w, false, done)
}

// WaitPutSignal enqueues a wait and then a put + signal in one launch.
func (k *Kernels) WaitPutSignal(s *cuda.Stream, w WaitSpec, p PutSignalSpec, done Done) error {
	return k.fused(s, KernelWaitPutSignal, p, w, true, done)
}

func (k *Kernels) fused(s *cuda.Stream, name string, p PutSignalSpec, w WaitSpec, waitFirst bool, done Done) error {
	if p.Op != SignalSet && p.Op != SignalAdd {
		return fmt.Errorf("put_signal: unknown op %d", p.Op)
	}
	if err := w.check("wait"); err != nil {
		return err
	}
	var a cuda.KernelArgs
	if waitFirst {
		w.push(&a)
		p.push(&a)
	} else {
		p.push(&a)
		w.push(&a)
	}
	a.Ptr(done.Ptr).U64(done.Seq)
	return k.launch(name, 1, putSignalThreads(p.N), s, &a)
}

// KernelPrelaunched is the prelaunched fused step (sync_fused.cu).
const KernelPrelaunched = "lc_prelaunched"

// PreCmdSize is the size in bytes of a prelaunch command block.
const PreCmdSize = 17 * 8

// Prelaunch enqueues a fused step whose arguments come later: the kernel
// polls the host-mapped command block cmd (PreCmdSize bytes) until its
// generation field holds gen, runs the command (see WritePreCmd) or returns
// (see CancelPreCmd, or when the abort flag is raised first), and as its
// last act stores gen into the host-mapped word ack: the block is free.
func (k *Kernels) Prelaunch(s *cuda.Stream, cmd cuda.DevicePtr, gen uint64, ack, abort cuda.DevicePtr) error {
	var a cuda.KernelArgs
	a.Ptr(cmd).U64(gen).Ptr(ack).Ptr(abort)
	// Not through the one-kernel graph (launchPlain).
	return k.launchPlain(KernelPrelaunched, 1, PutSignalMaxThreads, s, &a)
}

// WritePreCmd gives the prelaunched kernel of generation gen its step
// through the host view of its command block: the put + signal p and the
// wait w (w first when waitFirst), reporting to done. The generation is
// stored last, so the kernel never sees half a command.
func WritePreCmd(cmd unsafe.Pointer, gen uint64, waitFirst bool, p PutSignalSpec, w WaitSpec, done Done) error {
	if p.Op != SignalSet && p.Op != SignalAdd {
		return fmt.Errorf("put_signal: unknown op %d", p.Op)
	}
	if err := w.check("wait"); err != nil {
		return err
	}
	kind := uint64(1)
	if waitFirst {
		kind = 2
	}
	c := (*[PreCmdSize / 8]uint64)(cmd)
	vals := [...]uint64{kind, uint64(p.Dst), uint64(p.Src), p.N, uint64(p.Slot), p.Value, uint64(p.Op),
		uint64(w.Slots), uint64(w.Count), w.Stride, uint64(w.Cmp), w.Value, nanos(w.Timeout), uint64(w.Record),
		uint64(done.Ptr), done.Seq}
	for i, v := range vals {
		atomic.StoreUint64(&c[i+1], v)
	}
	atomic.StoreUint64(&c[0], gen)
	return nil
}

// CancelPreCmd tells the prelaunched kernel of generation gen to return
// without doing anything.
func CancelPreCmd(cmd unsafe.Pointer, gen uint64) {
	c := (*[PreCmdSize / 8]uint64)(cmd)
	atomic.StoreUint64(&c[1], 0)
	atomic.StoreUint64(&c[0], gen)
}

// PutSignalPingPong enqueues one side of a device-initiated put_signal
// ping-pong of iters round trips (see lc_pp_put_signal). outNs receives the
// elapsed device-clock nanoseconds, or ^0 on timeout.
//
// variant selects the memory-ordering scheme (see signal_put.cu); 3 has no
// ordering and only gives a floor, the others are correct (7, 9 and 10 only
// when both sides run on one GPU). 10 and 11 read src before each wait, so
// src must be memory that no peer writes.
func (k *Kernels) PutSignalPingPong(s *cuda.Stream, peerData, src cuda.DevicePtr, n uint64, peerSlot, mySlot cuda.DevicePtr,
	iters uint64, initiator bool, timeout time.Duration, outNs cuda.DevicePtr, variant int) error {
	init := int32(0)
	if initiator {
		init = 1
	}
	var a cuda.KernelArgs
	a.Ptr(peerData).Ptr(src).U64(n).Ptr(peerSlot).Ptr(mySlot).U64(iters).I32(init).U64(nanos(timeout)).Ptr(outNs).I32(int32(variant))
	return k.single(KernelPPPutSignal, s, &a)
}

// PutSignalPingPongLL enqueues one side of the put_signal ping-pong with
// each 8-byte payload carried in its signal's 16-byte line (see
// lc_pp_put_signal_ll): peerLine is the peer's line as mapped here, myLine
// this rank's; on each arrival the payload goes to myData and the round to
// mySlot. Lines must start at 0; src must be 8 private bytes (read before
// each wait); every address 8-byte aligned, lines 16-byte aligned.
func (k *Kernels) PutSignalPingPongLL(s *cuda.Stream, peerLine, myLine, myData, src, mySlot cuda.DevicePtr,
	iters uint64, initiator bool, timeout time.Duration, outNs cuda.DevicePtr) error {
	if iters >= 1<<32 {
		return fmt.Errorf("line ping-pong: iters %d: at most %d (the flag word is 32 bits)", iters, uint64(1<<32-1))
	}
	if peerLine%16 != 0 || myLine%16 != 0 {
		return fmt.Errorf("line ping-pong: lines %#x, %#x: not 16-byte aligned", uint64(peerLine), uint64(myLine))
	}
	if myData%8 != 0 || src%8 != 0 || mySlot%8 != 0 {
		return fmt.Errorf("line ping-pong: data %#x, src %#x, slot %#x: not 8-byte aligned", uint64(myData), uint64(src), uint64(mySlot))
	}
	init := int32(0)
	if initiator {
		init = 1
	}
	var a cuda.KernelArgs
	a.Ptr(peerLine).Ptr(myLine).Ptr(myData).Ptr(src).Ptr(mySlot).U64(iters).I32(init).U64(nanos(timeout)).Ptr(outNs)
	return k.single(KernelPPPutSignalLL, s, &a)
}

// BarrierLoop enqueues iters window barriers run back to back on the
// device (see lc_barrier_loop). rows is a device array of size pointers,
// or 0 for a symmetric window: rank p's row is then base + p*stride.
func (k *Kernels) BarrierLoop(s *cuda.Stream, rows, base cuda.DevicePtr, stride uint64, rank, size uint32, iters uint64, timeout time.Duration, outNs cuda.DevicePtr, variant int) error {
	var a cuda.KernelArgs
	a.Ptr(rows).Ptr(base).U64(stride).U32(rank).U32(size).U64(iters).U64(nanos(timeout)).Ptr(outNs).I32(int32(variant))
	return k.single(KernelBarrierLoop, s, &a)
}
