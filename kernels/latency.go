package kernels

import (
	"fmt"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// Names of the latency kernels (signal_put.cu).
const (
	KernelPutSignal     = "lc_put_signal"
	KernelPPPutSignal   = "lc_pp_put_signal"
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
	threads := uint32(PutSignalMaxThreads)
	if n/16 < uint64(threads) {
		threads = uint32((n/16 + 31) / 32 * 32)
		if threads == 0 {
			threads = 32
		}
	}
	var a cuda.KernelArgs
	a.Ptr(dst).Ptr(src).U64(n).Ptr(slot).U64(value).I32(int32(op))
	return k.launch(KernelPutSignal, 1, threads, s, &a)
}

// PutSignalPingPong enqueues one side of a device-initiated put_signal
// ping-pong of iters round trips (see lc_pp_put_signal). outNs receives the
// elapsed device-clock nanoseconds, or ^0 on timeout.
//
// variant selects the memory-ordering scheme (see signal_put.cu); 0 is the
// default and correct one, 3 has no ordering and only gives a floor.
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

// BarrierLoop enqueues iters window barriers run back to back on the
// device (see lc_barrier_loop). rows is a device array of size pointers.
func (k *Kernels) BarrierLoop(s *cuda.Stream, rows cuda.DevicePtr, rank, size uint32, iters uint64, timeout time.Duration, outNs cuda.DevicePtr, variant int) error {
	var a cuda.KernelArgs
	a.Ptr(rows).U32(rank).U32(size).U64(iters).U64(nanos(timeout)).Ptr(outNs).I32(int32(variant))
	return k.single(KernelBarrierLoop, s, &a)
}
