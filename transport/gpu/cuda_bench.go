package gpu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

// RefCopy is the reference a put is measured against: one cuMemcpyAsync of
// n bytes from src to dst (peer memory) on the side stream, timed by
// events around it (device clock, no launch or synchronization in it).
func (b *CUDABackend) RefCopy(dst, src transport.Addr, n uint64) (time.Duration, error) {
	var took time.Duration
	err := b.onAux(func() error {
		e0, err := b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		defer e0.Destroy()
		e1, err := b.drv.NewTimingEvent()
		if err != nil {
			return err
		}
		defer e1.Destroy()
		if err := e0.Record(b.aux); err != nil {
			return err
		}
		if err := b.drv.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n, b.aux); err != nil {
			return err
		}
		if err := e1.Record(b.aux); err != nil {
			return err
		}
		if err := b.aux.Synchronize(); err != nil {
			return err
		}
		ms, err := e0.ElapsedMs(e1)
		took = time.Duration(float64(ms) * float64(time.Millisecond))
		return err
	})
	return took, err
}

// DevicePingPong runs one side of a device-initiated ping-pong of iters
// round trips and returns the device-measured time. raw selects the bare
// flag ping-pong (stores to peerSlot, spins on mySlot); otherwise each
// step is a put of n bytes from src to peerData followed by the signal.
// Both ranks must call it at about the same time; slots must start at 0.
// local says the peer runs on this GPU: its signals then need only GPU
// scope (release store and acquire load), not system scope.
func (b *CUDABackend) DevicePingPong(raw bool, peerData, src transport.Addr, n uint64, peerSlot, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration, local bool) (time.Duration, error) {
	// src is a private buffer: 10 and 11 may read it before each wait.
	variant := orderingPutSignal
	if local {
		variant = orderingPutSignalLocal
	}
	ns, err := b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		if raw {
			return b.k.PingPong(s, cuda.DevicePtr(mySlot), cuda.DevicePtr(peerSlot), iters, initiator, timeout, out)
		}
		return b.k.PutSignalPingPong(s, cuda.DevicePtr(peerData), cuda.DevicePtr(src), n, cuda.DevicePtr(peerSlot),
			cuda.DevicePtr(mySlot), iters, initiator, timeout, out, variant)
	})
	return b.pingPongTime("device ping-pong", ns, err, timeout)
}

// pingPongTime is a ping-pong loop's result: its device time, or why it
// has none (what names the loop; ns is ^0 when the peer did not answer).
func (b *CUDABackend) pingPongTime(what string, ns uint64, err error, timeout time.Duration) (time.Duration, error) {
	if err != nil {
		return 0, err
	}
	if ns == ^uint64(0) {
		if b.timeoutHint != "" {
			return 0, fmt.Errorf("%s: no answer from the peer within %v (%s)", what, timeout, b.timeoutHint)
		}
		return 0, fmt.Errorf("%s: no answer from the peer within %v", what, timeout)
	}
	return time.Duration(ns), nil
}

// DeviceLinePingPong runs one side of the put_signal ping-pong whose 8-byte
// payloads travel in their signals' 16-byte lines (kernels'
// PutSignalPingPongLL): peerLine is the peer's line as mapped here, myLine
// this rank's; each arrival leaves the payload at myData and the round in
// mySlot. Lines must start at 0; src is private. Both ranks must call it
// at about the same time.
func (b *CUDABackend) DeviceLinePingPong(peerLine, myLine, myData, src, mySlot transport.Addr, iters uint64, initiator bool, timeout time.Duration) (time.Duration, error) {
	ns, err := b.runAux(func(s *cuda.Stream, out cuda.DevicePtr) error {
		return b.k.PutSignalPingPongLL(s, cuda.DevicePtr(peerLine), cuda.DevicePtr(myLine), cuda.DevicePtr(myData),
			cuda.DevicePtr(src), cuda.DevicePtr(mySlot), iters, initiator, timeout, out)
	})
	return b.pingPongTime("device line ping-pong", ns, err, timeout)
}

// DeviceBarrierLoop runs iters barriers back to back on the device over
// rows (rows[p]: rank p's row of len(rows) slots, as mapped here, all 0)
// and returns the device-measured time. local says every rank runs on this
// GPU (GPU-scope ordering suffices). flat, when set, is the symmetric
// window the rows lie in (rows[p] = flat.Base + p*flat.Stride + the same
// offset): the kernel then finds every row by arithmetic, with no table.
func (b *CUDABackend) DeviceBarrierLoop(rows []transport.Addr, rank int, iters uint64, timeout time.Duration, local bool, flat *transport.FlatRange) (time.Duration, error) {
	variant := orderingBarrier
	if local {
		variant = orderingBarrierLocal
	}
	if flat != nil {
		for p, r := range rows {
			if uint64(r)-uint64(rows[0]) != uint64(p)*flat.Stride {
				return 0, fmt.Errorf("device barrier loop: rank %d's row is not at base + %d*stride", p, p)
			}
		}
	}
	table := make([]byte, 8*len(rows))
	for i, r := range rows {
		binary.LittleEndian.PutUint64(table[8*i:], uint64(r))
	}
	var ns uint64
	err := b.onAux(func() error {
		if flat != nil {
			if err := b.k.BarrierLoop(b.aux, 0, cuda.DevicePtr(rows[0]), flat.Stride, uint32(rank), uint32(len(rows)), iters, timeout, b.result.Dev, variant); err != nil {
				return err
			}
			if err := b.aux.Synchronize(); err != nil {
				return err
			}
			ns = atomic.LoadUint64((*uint64)(b.result.Host))
			return nil
		}
		p, err := b.drv.MemAlloc(uint64(len(table)))
		if err != nil {
			return err
		}
		defer b.drv.MemFree(p) // after the sync below: the kernel reads it
		// On the side stream, in order with the kernel below (a plain HtoD
		// from pageable memory may still be in flight when it returns).
		if err := b.drv.MemcpyHtoDAsync(p, unsafe.Pointer(unsafe.SliceData(table)), uint64(len(table)), b.aux); err != nil {
			return err
		}
		if err := b.k.BarrierLoop(b.aux, p, 0, 0, uint32(rank), uint32(len(rows)), iters, timeout, b.result.Dev, variant); err != nil {
			return err
		}
		if err := b.aux.Synchronize(); err != nil {
			return err
		}
		ns = atomic.LoadUint64((*uint64)(b.result.Host))
		return nil
	})
	if err != nil {
		return 0, err
	}
	if ns == ^uint64(0) {
		return 0, fmt.Errorf("device barrier loop: peers did not arrive within %v", timeout)
	}
	return time.Duration(ns), nil
}

// The memory-ordering variants of the device-loop benchmarks (see
// signal_put.cu): the fastest correct ones measured, across GPUs and with
// every rank on this GPU (docs/results/knobs-retired.md has the figures
// of the others).
const (
	orderingPutSignal      = 11 // release store, acquire load of the flag, source read before the wait
	orderingPutSignalLocal = 10 // GPU scope, the poll itself the acquire, source read before the wait
	orderingBarrier        = 6  // release stores to the peers only, acquire load of each peer's slot
	orderingBarrierLocal   = 8  // 6 at GPU scope
)
