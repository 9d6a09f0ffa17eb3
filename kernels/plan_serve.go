package kernels

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/luacoll/luacoll/cuda"
)

// KernelPlanServe is the plan server (sync_plan_serve.cu): one launch of
// the interpreter running the plan calls posted to a ring of host-mapped
// command slots, with blocks of at most PlanMidThreads threads (built for
// that bound, as KernelPlanMid; a plan of larger blocks is launched).
const KernelPlanServe = "lc_plan_serve"

// The server's ring: PlanServeSlots command slots of PlanServeCmdSize
// bytes (host-mapped; a command's words as 16-byte lines, each with the
// command's number), and its state, two words (host-mapped): the number
// of the last command done, and the identity (first command's number) of
// the last server that ended.
const (
	PlanServeSlots     = 8
	PlanServeCmdSize   = 512
	PlanServeStateSize = 16
)

// serveWords is how many words a command has (sync_plan_serve.cu's
// lc_serve_cmd): its kind, nine of the plan's, and the moves.
const serveWords = 10 + 1 + PlanMoves

// sync_plan_serve.cu's LC_SERVE_*.
const (
	serveRun  = 1
	serveStop = 2
)

// PlanServe enqueues a plan server on s, with blocks of threads threads
// (a multiple of 32, at most PlanMidThreads): it serves commands first,
// first+1, ... from ring (PlanServeSlots * PlanServeCmdSize bytes) until a
// STOP, the abort flag, or a command that fails, and reports through state.
// Not through the one-kernel graph: the server runs for a long time, and
// updating the graph while an instance runs waits for it.
func (k *Kernels) PlanServe(s *cuda.Stream, ring cuda.DevicePtr, first uint64, state, abort cuda.DevicePtr, threads uint32) error {
	if threads == 0 || threads > PlanMidThreads || threads%32 != 0 || first == 0 || ring == 0 || state == 0 {
		return fmt.Errorf("plan server (%d threads, from command %d): %w", threads, first, ErrBadSpec)
	}
	var a cuda.KernelArgs
	a.Ptr(ring).U64(first).Ptr(state).Ptr(abort)
	return k.launchPlain(KernelPlanServe, 1, threads, s, &a)
}

// ServePlanCmd posts p (one launch's worth of a plan, one block, as Plan
// takes it; Threads and Blocks are the server's) as command seq, through
// the host view of the ring: word k of the command in line k of the slot,
// each followed by seq, line 0 last, so that the server never takes half
// a command (sync_plan_serve.cu).
func ServePlanCmd(ring unsafe.Pointer, seq uint64, p PlanSpec) error {
	if p.Count == 0 || p.Period == 0 || p.Period > PlanMaxSteps || p.First >= p.Period || p.Tag >= PlanMaxTag || p.Steps == 0 ||
		p.Blocks > 1 || p.Epoch != 0 {
		return fmt.Errorf("served plan (%d steps from step %d of %d, tag %d): %w", p.Count, p.First, p.Period, p.Tag, ErrBadSpec)
	}
	var w [serveWords]uint64
	if err := encodeMoves(w[10:], p); err != nil {
		return err
	}
	w[0], w[1], w[2], w[3], w[4] = serveRun, uint64(p.Steps), uint64(p.Period), uint64(p.First), p.Count
	w[5], w[6], w[7], w[8], w[9] = p.Rep0, nanos(p.Timeout), uint64(p.Record), uint64(p.Tag), uint64(planFlags(p))
	postServeLines(serveSlot(ring, seq), seq, w[:])
	return nil
}

// ServeStopCmd posts STOP as command seq: the server ends there.
func ServeStopCmd(ring unsafe.Pointer, seq uint64) {
	var w [serveWords]uint64
	w[0] = serveStop
	postServeLines(serveSlot(ring, seq), seq, w[:])
}

// postServeLines stores words as the lines of slot: every word, then seq
// into every line, line 0 last (atomic stores: each is ordered after every
// store before it, on every processor).
func postServeLines(slot unsafe.Pointer, seq uint64, words []uint64) {
	line := func(k int) *[2]uint64 { return (*[2]uint64)(unsafe.Add(slot, 16*k)) }
	for k, w := range words {
		line(k)[0] = w
	}
	for k := len(words) - 1; k >= 0; k-- {
		atomic.StoreUint64(&line(k)[1], seq)
	}
}

func serveSlot(ring unsafe.Pointer, seq uint64) unsafe.Pointer {
	return unsafe.Add(ring, (seq%PlanServeSlots)*PlanServeCmdSize)
}

// ServeState reads a server's state through its host view: the number of
// the last command done, and the identity of the last server that ended.
func ServeState(state unsafe.Pointer) (done, ended uint64) {
	return atomic.LoadUint64((*uint64)(state)), atomic.LoadUint64((*uint64)(unsafe.Add(state, 8)))
}
