package kernels

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// KernelPlan is the plan interpreter (sync_plan.cu); KernelPlanMid the
// same for blocks of at most PlanMidThreads threads, built for that bound
// (twice the registers a thread: the interpreter's loop keeps its state in
// registers, not in local memory; docs/results/reductions.md).
const (
	KernelPlan    = "lc_plan"
	KernelPlanMid = "lc_plan_mid"
)

// planKernel is the interpreter that runs blocks of threads threads.
func planKernel(threads uint32) string {
	if threads <= PlanMidThreads {
		return KernelPlanMid
	}
	return KernelPlan
}

// StepKind is what one step of a device plan does.
type StepKind uint32

// Step kinds, as sync_plan.cu numbers them.
const (
	StepCopy      StepKind = iota // N bytes from Src to Dst: every thread above PlanSmall bytes, else thread 0
	StepStore                     // thread 0: release store of Value + replay*Step into the slot at Dst
	StepAdd                       // thread 0: release atomic add of Value to the slot at Dst
	StepWait                      // thread 0: until the sum of Count slots from Dst, N bytes apart, Cmp Value + replay*Step (Count's low WaitGroupShift bits; the high ones: a wait group)
	StepFillByte                  // every thread: N bytes at Dst = byte(Value)
	StepFillIota                  // every thread: N bytes at Dst = little-endian u32 words Value, Value+1, ...
	StepFillRand                  // every thread: N bytes at Dst = the random stream of seed Value (FillRand's)
	StepPutSignal                 // thread 0: N <= PlanSmall bytes from Src to Dst, then a release of Value into the slot at Aux (Cmp bit 0: add, else store; PutPrivate)
	StepLinePut                   // N bytes of Src, 8 a line, each line with the flag Value + replay*Step, in 16-byte lines from Dst (no release; Cmp: PutPrivate); N <= 8: thread 0, else every thread
	StepLineWait                  // until the lines from Dst show the flag Value + replay*Step; then their N bytes to Src and Cmp added to the slot at Aux (Count: LineSendFirst); N <= 8: thread 0, else every thread
	// StepReduce: every thread, Dst op= Src over N bytes (whole elements,
	// both aligned to the element), the type and operator of
	// ReduceStepValue in Value; Src may be a peer's memory this device
	// maps. Stream and graph mode cut it out as a launch of the reduce
	// kernel instead.
	StepReduce
	// StepGrid: the blocks of a spread plan meet (PlanSpec.Spread); on one
	// block, nothing. SpreadSteps puts them in.
	StepGrid
)

// ReduceStepValue is a StepReduce's Value: the element type and the operator.
func ReduceStepValue(t DType, op RedOp) uint64 { return uint64(t) | uint64(op)<<8 }

// ReduceStepOf reads ReduceStepValue back.
func ReduceStepOf(v uint64) (DType, RedOp) { return DType(v & 0xff), RedOp(v >> 8 & 0xff) }

// CopyLocal in a StepCopy's Aux marks a copy within the rank's own memory
// (a put to itself) in a plan whose peers are on other GPUs: the launches
// of stream and graph mode may run it beside the steps after it (the
// interpreter ignores Aux for copies).
const CopyLocal cuda.DevicePtr = 1

// PutPrivate, or'd into a StepPutSignal's Cmp, says that no peer writes
// its source: a wait just before the step may then read 8 or 16 aligned
// bytes of it before spinning (sync_plan.cu's LC_PS_PRIVATE).
const PutPrivate Cmp = 2

// Line groups (sync_plan.cu): up to PlanLineGroupMax line steps in a row
// run as one step of every thread. A StepLineWait whose Count holds k <<
// LineGroupShift (k >= 2) drains itself and the k - 1 drains after it at
// once; a StepLinePut whose Count is k >= 2 sends its source to its own
// place and to those of the k - 1 line puts after it (of the same Src and
// N). Copy groups take the same Count bits: a wide StepCopy whose Count
// holds k << LineGroupShift (k >= 2) copies its source to its own place
// and to those of the k - 1 wide copies after it (of the same Src and N,
// Count 0), as one step. Where the steps are not such, the interpreter
// runs them one by one.
const (
	PlanLineGroupMax = 8
	LineGroupShift   = 8
)

// Wait groups (sync_plan.cu): a StepWait whose Count holds k <<
// WaitGroupShift (k >= 2, at most PlanLineGroupMax) above its count of
// slots waits for itself and the k - 1 waits after it side by side, one
// thread each, as one step; the count of slots of a wait is Count &
// WaitSlotsMask.
const (
	WaitGroupShift = 24
	WaitSlotsMask  = 1<<WaitGroupShift - 1
)

// LineSendFirst in a StepLineWait's Count lets the drain send the next
// step's line (a StepLinePut right after it, from a private source) as
// soon as its own line is in, before it writes the payload: allowed when
// no peer reads the rank's window (get, reduce_from).
const LineSendFirst = 1

// PlanStep is one step of a device plan, laid out as sync_plan.cu's
// struct lc_plan_step (PlanStepSize bytes).
type PlanStep struct {
	Kind  StepKind
	Count uint32
	Cmp   Cmp
	Op    uint32 // the plan op this step belongs to, for the host
	Dst   cuda.DevicePtr
	Src   cuda.DevicePtr
	N     uint64
	Value uint64
	Step  uint64
	Aux   cuda.DevicePtr
}

// Check reports what makes a step one the interpreter must not run: a
// reduction of an unknown type or operator, of a part of an element, or
// at an address not aligned to the element (the interpreter assumes
// all of these). Other steps pass.
func (s PlanStep) Check() error {
	if s.Kind != StepReduce {
		return nil
	}
	t, op := ReduceStepOf(s.Value)
	switch {
	case s.Value>>16 != 0 || !t.Valid() || !op.Valid():
		return fmt.Errorf("reduce step: %w: value %#x names no element type and operator", ErrBadSpec, s.Value)
	case s.N%t.Size() != 0:
		return fmt.Errorf("reduce step: %w: %d bytes is not a whole number of %s elements", ErrBadSpec, s.N, t)
	case uint64(s.Dst)%t.Size() != 0 || uint64(s.Src)%t.Size() != 0:
		return fmt.Errorf("reduce step: %w: %s at %#x from %#x: not aligned to the element", ErrBadSpec, t, uint64(s.Dst), uint64(s.Src))
	}
	return nil
}

// PlanCache is the most steps a plan may have to be read into the
// interpreter's shared memory whole (sync_plan.cu's LC_PLAN_CACHE).
const PlanCache = 64

// PlanMoves is the most moving values one launch may set (sync_plan.cu's
// LC_PLAN_MOVES), and PlanMoveMax one more than the largest such value.
const (
	PlanMoves   = 20
	planMoveBit = 58
	PlanMoveMax = 1 << planMoveBit
)

// PlanMove is a value a launch sets in step Step of a cached table for its
// first replay (PlanSpec.Moves).
type PlanMove struct {
	Step  int
	Value uint64
}

// PlanChainMax is the most reduce steps the interpreter runs as one chain
// (a StepReduce whose Count is k > 1 and the k - 1 steps after it, into
// the same destination; reduce.cu's LC_CHAIN_MAX).
const PlanChainMax = 8

// PlanLineMax is the default for the largest put_signal of a plan of 2
// ranks that travels in lines (8 bytes a 16-byte line; knobs.PlanLines
// sets it), PlanLineMaxMany that of a plan of more. On 2 H200s lines took
// less time than a copy and a release up to 4 KiB, about as much at 16
// KiB, more at 64 KiB; on 4, lines of 4 KiB puts took longer than copies
// (a 16 KiB reduce-scatter 18.1 us against 15.8 with lines up to 1 KiB:
// docs/results/reductions.md).
const (
	PlanLineMax     = 4096
	PlanLineMaxMany = 1024
)

// PlanStepSize is the size of one encoded step.
const PlanStepSize = 64

// PlanThreads is the largest block of the plan interpreter (sync_plan.cu's
// LC_PLAN_THREADS, its launch bound). A block of 1,024 took longer than
// one of 512 for steps of 64 KiB (docs/results/reductions.md).
const PlanThreads = 512

// PlanSmallThreads is the smallest block PlanThreadsFor gives (a step of
// a smaller block takes less time to run and to meet at its barrier:
// TestPlanStepCost), PlanSmallBytes the widest step it gives it to.
// PlanMidThreads is the largest it gives plans whose widest step has at
// most PlanMidBytes (on 2 x H200, 256 threads ran 64 KiB steps no slower
// than 512, and 16 KiB ones faster: docs/results/reductions.md).
const (
	PlanSmallThreads = 128
	PlanSmallBytes   = 4096
	PlanMidThreads   = 256
	PlanMidBytes     = 128 << 10
)

// PlanThreadsFor is the block size for a plan of steps: enough threads
// that its widest copy, fill or reduction (or line put or drain, at 16
// bytes a line of 8) takes each of them four 16-byte words at most, the
// copy and reduce loops' one turn of loads in flight; a multiple of 32
// from PlanSmallThreads to PlanMidThreads, or PlanThreads for steps wider
// than PlanMidBytes.
func PlanThreadsFor(steps []PlanStep) uint32 { return threadsForWords(widestWords(steps)) }

// widestWords is how many 16-byte words the widest step of steps moves
// (a line of 8 bytes counting as one).
func widestWords(steps []PlanStep) uint64 {
	var words uint64
	for _, s := range steps {
		switch s.Kind {
		case StepCopy, StepFillByte, StepFillIota, StepFillRand, StepReduce:
			words = max(words, (s.N+15)/16)
		case StepLinePut, StepLineWait:
			words = max(words, (s.N+7)/8)
		}
	}
	return words
}

// threadsForWords is PlanThreadsFor's block size for a widest step of
// words 16-byte words.
func threadsForWords(words uint64) uint32 {
	if words*16 > PlanMidBytes {
		return PlanThreads
	}
	t := (words + 4*32 - 1) / (4 * 32) * 32
	return uint32(min(max(t, PlanSmallThreads), PlanMidThreads))
}

// PlanJobSize is the size of a spread plan's job area (sync_grid.cu's
// LC_PLAN_JOB_SIZE): device memory, 128-byte aligned, zero before its
// first launch (each launch leaves it so).
const PlanJobSize = 320

// PlanFailBit marks a failure record written by the plan interpreter: its
// slot field is PlanFailBit | tag<<20 | step index.
const PlanFailBit = 1 << 31

// PlanMaxSteps is the most steps one device plan may have (the step index
// takes 20 bits of a failure record).
const PlanMaxSteps = 1 << 20

// PlanMaxTag is one more than the largest tag a plan may have.
const PlanMaxTag = 1 << 11

// DecodePlanFailure splits a failure record's slot field: ok is false when
// the plan interpreter did not write it.
func DecodePlanFailure(slot uint32) (tag uint32, step int, ok bool) {
	if slot&PlanFailBit == 0 {
		return 0, 0, false
	}
	return (slot >> 20) & (PlanMaxTag - 1), int(slot & (PlanMaxSteps - 1)), true
}

// EncodePlan lays steps out for the device.
func EncodePlan(steps []PlanStep) []byte {
	b := make([]byte, PlanStepSize*len(steps))
	for i, s := range steps {
		p := b[PlanStepSize*i:]
		binary.LittleEndian.PutUint32(p[0:], uint32(s.Kind))
		binary.LittleEndian.PutUint32(p[4:], s.Count)
		binary.LittleEndian.PutUint32(p[8:], uint32(s.Cmp))
		binary.LittleEndian.PutUint32(p[12:], s.Op)
		binary.LittleEndian.PutUint64(p[16:], uint64(s.Dst))
		binary.LittleEndian.PutUint64(p[24:], uint64(s.Src))
		binary.LittleEndian.PutUint64(p[32:], s.N)
		binary.LittleEndian.PutUint64(p[40:], s.Value)
		binary.LittleEndian.PutUint64(p[48:], s.Step)
		binary.LittleEndian.PutUint64(p[56:], uint64(s.Aux))
	}
	return b
}

// PlanSpec is one launch of the plan interpreter: Count steps of a plan
// of Period steps at Steps (device memory, EncodePlan's layout), from step
// First of replay Rep0 on; step Period-1 of a replay is followed by step 0
// of the next. Every replay of a run is First 0, Count Period*replays; one
// run of steps [a, b) of a replay is First a, Count b-a; the run [a,
// Period) of replay r with [0, b) of replay r+1 is First a, Count
// Period-a+b.
type PlanSpec struct {
	Steps         cuda.DevicePtr
	Period, First uint32
	Count         uint64
	Rep0          uint64
	Timeout       time.Duration // per wait; <= 0: none
	Abort         cuda.DevicePtr
	Record        cuda.DevicePtr
	Tag           uint32
	// GPUScope orders signals at GPU scope: every peer the plan touches
	// runs on this GPU.
	GPUScope bool
	// PollAcquire makes a wait on one slot at GPU scope poll with acquire
	// loads, so the poll that sees the value is the acquire; otherwise it
	// polls with relaxed loads and acquires once after.
	PollAcquire bool
	// NoPrefetch turns off the early read of a private put_signal source
	// by the wait before it.
	NoPrefetch bool
	// Threads is the block size (0: PlanThreads; at most PlanThreads, the
	// kernel's launch bound; a multiple of 32).
	Threads uint32
	// Epoch, when set, is device memory whose value is added to Rep0 as
	// the kernel starts (a graph's replay count).
	Epoch cuda.DevicePtr
	// Blocks is the grid (0 or 1: one block); more need Spread and Job,
	// the plan's job area (PlanJobSize bytes, 128-byte aligned, zero
	// before its first launch and used by no other plan).
	Blocks uint32
	Job    cuda.DevicePtr
	// Spread runs the plan on every one of Blocks blocks, its wide steps
	// cut among them (sync_grid.cu), the job area holding their arrivals:
	// steps made by SpreadSteps for Blocks blocks of Threads threads, at
	// most PlanCache of them, no line steps. It turns the early read of
	// put_signal sources off (NoPrefetch).
	Spread bool
	// Moves set the values of moving steps for replay Rep0 of this launch
	// (at most PlanMoves, each below PlanMoveMax), leaving the table in
	// device memory as it is: for a plan of at most PlanCache steps.
	Moves []PlanMove
}

// PlanSmall is the largest copy the interpreter leaves to thread 0 (as
// sync_plan.cu's LC_PLAN_SMALL).
const PlanSmall = 256

// Wide reports whether every thread of the interpreter's block takes part
// in the step (a fill, a reduction, or a copy above PlanSmall bytes);
// other steps are thread 0's.
func (s PlanStep) Wide() bool {
	switch s.Kind {
	case StepFillByte, StepFillIota, StepFillRand, StepReduce, StepGrid:
		return true
	case StepCopy:
		return s.N > PlanSmall
	}
	return false
}

// Plan enqueues one launch of the plan interpreter (p.Blocks blocks).
func (k *Kernels) Plan(s *cuda.Stream, p PlanSpec) error {
	if p.Count == 0 || p.Period == 0 || p.Period > PlanMaxSteps || p.First >= p.Period || p.Tag >= PlanMaxTag || p.Steps == 0 {
		return fmt.Errorf("plan (%d steps from step %d of %d, tag %d): %w", p.Count, p.First, p.Period, p.Tag, ErrBadSpec)
	}
	if p.Threads > PlanThreads || p.Threads%32 != 0 {
		return fmt.Errorf("plan of %d threads a block: %w: a multiple of 32, at most %d", p.Threads, ErrBadSpec, PlanThreads)
	}
	blocks := max(p.Blocks, 1)
	if blocks > 1 && (!p.Spread || p.Job == 0 || uint64(p.Job)%128 != 0) {
		return fmt.Errorf("plan of %d blocks (spread: %v), job area %#x: %w", p.Blocks, p.Spread, uint64(p.Job), ErrBadSpec)
	}
	if p.Spread && (blocks > PlanSpreadMax || p.Period > PlanCache) {
		return fmt.Errorf("spread plan of %d blocks, %d steps: %w: at most %d blocks and %d steps", blocks, p.Period, ErrBadSpec, PlanSpreadMax, PlanCache)
	}
	var a cuda.KernelArgs
	a.Ptr(p.Steps).U32(p.Period).U32(p.First).U64(p.Count).U64(p.Rep0).U64(nanos(p.Timeout)).Ptr(p.Abort).Ptr(p.Record).U32(p.Tag).I32(planFlags(p)).Ptr(p.Epoch).Ptr(p.Job)
	if err := pushMoves(&a, p); err != nil {
		return err
	}
	threads := p.Threads
	if threads == 0 {
		threads = PlanThreads
	}
	return k.launch(planKernel(threads), blocks, threads, s, &a)
}

// planFlags is p's sync_plan.cu LC_PLAN_* flags.
func planFlags(p PlanSpec) int32 {
	flags := int32(0)
	if p.GPUScope {
		flags |= 1
	}
	if p.PollAcquire {
		flags |= 2
	}
	if p.NoPrefetch {
		flags |= 4
	}
	if p.Spread && p.Blocks > 1 {
		flags |= planSpreadFlag | 4
	}
	return flags
}

// pushMoves appends the launch's moving values: the kernel's last
// parameter, a struct of a count and PlanMoves words taken by value, which
// the driver reads from the argument slots that follow one another.
func pushMoves(a *cuda.KernelArgs, p PlanSpec) error {
	var w [1 + PlanMoves]uint64
	if err := encodeMoves(w[:], p); err != nil {
		return err
	}
	for _, v := range w {
		a.U64(v)
	}
	return nil
}

// encodeMoves lays p's moving values out as sync_plan.cu's lc_plan_moves:
// their count, then each step's index and value in one word.
func encodeMoves(w []uint64, p PlanSpec) error {
	if len(p.Moves) > PlanMoves || len(p.Moves) > 0 && p.Period > PlanCache {
		return fmt.Errorf("plan of %d steps: %d moving values: %w: at most %d, in a plan of at most %d steps", p.Period, len(p.Moves), ErrBadSpec, PlanMoves, PlanCache)
	}
	w[0] = uint64(len(p.Moves))
	for i, m := range p.Moves {
		if m.Step < 0 || m.Step >= int(p.Period) || m.Value >= PlanMoveMax {
			return fmt.Errorf("plan moving value %d at step %d of %d: %w", m.Value, m.Step, p.Period, ErrBadSpec)
		}
		w[1+i] = uint64(m.Step)<<planMoveBit | m.Value
	}
	clear(w[1+len(p.Moves):])
	return nil
}
