package kernels

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// KernelPlanServe is the plan server (sync_plan_serve.cu): one launch of
// the interpreter running the plan calls posted to a ring of host-mapped
// command slots.
const KernelPlanServe = "lc_plan_serve"

// The server's ring: PlanServeSlots command slots of PlanServeCmdSize
// bytes (host-mapped), and its state, two words (host-mapped): the number
// of the last command done, and the identity (first command's number) of
// the last server that ended.
const (
	PlanServeSlots     = 8
	PlanServeCmdSize   = 256
	PlanServeStateSize = 16
)

// sync_plan_serve.cu's LC_SERVE_*.
const (
	serveRun  = 1
	serveStop = 2
)

// PlanServe enqueues a plan server on s, with blocks of threads threads
// (a multiple of 32, at most PlanThreads): it serves commands first,
// first+1, ... from ring (PlanServeSlots * PlanServeCmdSize bytes) until a
// STOP, the abort flag, or a command that fails, and reports through state.
// Not through the one-kernel graph: the server runs for a long time, and
// updating the graph while an instance runs waits for it.
func (k *Kernels) PlanServe(s *cuda.Stream, ring cuda.DevicePtr, first uint64, state, abort cuda.DevicePtr, threads uint32) error {
	if threads == 0 || threads > PlanThreads || threads%32 != 0 || first == 0 || ring == 0 || state == 0 {
		return fmt.Errorf("plan server (%d threads, from command %d): %w", threads, first, ErrBadSpec)
	}
	var a cuda.KernelArgs
	a.Ptr(ring).U64(first).Ptr(state).Ptr(abort)
	return k.launchPlain(KernelPlanServe, 1, threads, s, &a)
}

// ServePlanCmd posts p (one launch's worth of a plan, one block, as Plan
// takes it; Threads and Blocks are the server's) as command seq, through
// the host view of the ring. The number is stored last, so the server
// never sees half a command.
func ServePlanCmd(ring unsafe.Pointer, seq uint64, p PlanSpec) error {
	if p.Count == 0 || p.Period == 0 || p.Period > PlanMaxSteps || p.First >= p.Period || p.Tag >= PlanMaxTag || p.Steps == 0 ||
		p.Blocks > 1 || p.Epoch != 0 {
		return fmt.Errorf("served plan (%d steps from step %d of %d, tag %d): %w", p.Count, p.First, p.Period, p.Tag, ErrBadSpec)
	}
	var moves [1 + PlanMoves]uint64
	if err := encodeMoves(moves[:], p); err != nil {
		return err
	}
	var b [PlanServeCmdSize]byte
	w := func(i int, v uint64) { binary.LittleEndian.PutUint64(b[8*i:], v) }
	w(1, serveRun)
	w(2, uint64(p.Steps))
	w(3, uint64(p.Period))
	w(4, uint64(p.First))
	w(5, p.Count)
	w(6, p.Rep0)
	w(7, nanos(p.Timeout))
	w(8, uint64(p.Record))
	w(9, uint64(p.Tag))
	w(10, uint64(planFlags(p)))
	for i, v := range moves {
		w(11+i, v)
	}
	slot := serveSlot(ring, seq)
	copy(unsafe.Slice((*byte)(unsafe.Add(slot, 8)), PlanServeCmdSize-8), b[8:])
	atomic.StoreUint64((*uint64)(slot), seq)
	return nil
}

// ServeStopCmd posts STOP as command seq: the server ends there.
func ServeStopCmd(ring unsafe.Pointer, seq uint64) {
	slot := serveSlot(ring, seq)
	atomic.StoreUint64((*uint64)(unsafe.Add(slot, 8)), serveStop)
	atomic.StoreUint64((*uint64)(slot), seq)
}

func serveSlot(ring unsafe.Pointer, seq uint64) unsafe.Pointer {
	return unsafe.Add(ring, (seq%PlanServeSlots)*PlanServeCmdSize)
}

// ServeState reads a server's state through its host view: the number of
// the last command done, and the identity of the last server that ended.
func ServeState(state unsafe.Pointer) (done, ended uint64) {
	return atomic.LoadUint64((*uint64)(state)), atomic.LoadUint64((*uint64)(unsafe.Add(state, 8)))
}
