package kernels

import (
	"fmt"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// Kernel names of the persistent all-gather's synchronization (sync_agp.cu).
const (
	KernelAGPReady     = "lc_agp_ready"
	KernelAGPDone      = "lc_agp_done"
	KernelAGPDoneReady = "lc_agp_done_ready"
)

// AGPKernels launches the persistent all-gather's one-thread
// synchronization kernels. It is read-only after AGP returns.
type AGPKernels struct {
	k                      *Kernels
	ready, done, doneReady *cuda.Function
}

// AGP looks up the persistent all-gather kernels in the loaded program.
func (k *Kernels) AGP() (*AGPKernels, error) {
	a := &AGPKernels{k: k}
	var err error
	if a.ready, err = k.function(KernelAGPReady); err != nil {
		return nil, fmt.Errorf("persistent all-gather kernels: %w", err)
	}
	if a.done, err = k.function(KernelAGPDone); err != nil {
		return nil, fmt.Errorf("persistent all-gather kernels: %w", err)
	}
	if a.doneReady, err = k.function(KernelAGPDoneReady); err != nil {
		return nil, fmt.Errorf("persistent all-gather kernels: %w", err)
	}
	return a, nil
}

// AGPSpec is what both kernels need.
type AGPSpec struct {
	// Count is the exec counter (8 bytes of zeroed device memory).
	Count cuda.DevicePtr
	// Remote is a device array of Size pointers: entry p is the slot rank p
	// reads for this rank, as mapped here. Local is a device array of Size
	// pointers: entry p is this rank's slot that rank p writes.
	Remote, Local cuda.DevicePtr
	Rank, Size    uint32
	Timeout       time.Duration
	Abort         cuda.DevicePtr
	Record        cuda.DevicePtr
	// Fences adds system-wide fences to the ready and done kernels, for
	// measurements: AGPFenceReady before the ready signals, AGPFenceAfter
	// after the polls. 0 (none) is the default: every poll ends with a
	// system-scope acquire load, and the work a ready signal vouches for
	// ended before the kernel started.
	Fences int
	// Trace, when set, is AGPTraceBytes of device memory where the ready
	// and done kernels store when they started and ended (a measurement;
	// see AGPTrace).
	Trace cuda.DevicePtr
}

// AGPTraceExecs is how many execs a trace holds (the latest ones), and
// AGPTraceBytes its size: per exec the ready kernel's start and end, then
// the done kernel's, in %globaltimer nanoseconds.
const (
	AGPTraceExecs = 1024
	AGPTraceBytes = AGPTraceExecs * 4 * 8
)

// Bits of AGPSpec.Fences (measurements): fences before the ready signals
// and after the polls; AGPNoPrecheck, which leaves out the look at the
// error record (host-mapped: a read across PCIe) before the signals; and
// AGPFusedNoWait, with which a fused done+ready launch waits for no peer
// (the ceiling of handshake-free back-to-back execs; safe only while every
// rank's execs follow each other with nothing between them).
const (
	AGPFenceReady  = 1
	AGPFenceAfter  = 2
	AGPNoPrecheck  = 4
	AGPFusedNoWait = 8
)

func (s AGPSpec) check(what string) error {
	if s.Size == 0 || s.Rank >= s.Size || s.Count == 0 || s.Count%8 != 0 || s.Remote%8 != 0 || s.Local%8 != 0 {
		return fmt.Errorf("%s(rank %d of %d): %w", what, s.Rank, s.Size, ErrBadSpec)
	}
	return nil
}

// Ready enqueues the start of an exec: the counter goes to e = count+1,
// e is written to every peer's ready slot, and the kernel waits until
// every local ready slot is >= e.
func (a *AGPKernels) Ready(s *cuda.Stream, sp AGPSpec) error {
	if err := sp.check("agp ready"); err != nil {
		return err
	}
	var args cuda.KernelArgs
	args.Ptr(sp.Count).Ptr(sp.Remote).Ptr(sp.Local).U32(sp.Rank).U32(sp.Size).U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record).I32(int32(sp.Fences & 15)).Ptr(sp.Trace)
	return a.k.drv.LaunchKernel(a.ready, cuda.D1(1), cuda.D1(1), 0, s, &args)
}

// Done enqueues the end of an exec of n bytes per rank: AGPTag(count, n)
// is written to every peer's done slot, and the kernel waits until every
// local done slot equals it.
func (a *AGPKernels) Done(s *cuda.Stream, sp AGPSpec, n uint64) error {
	if err := sp.check("agp done"); err != nil {
		return err
	}
	var args cuda.KernelArgs
	args.Ptr(sp.Count).Ptr(sp.Remote).Ptr(sp.Local).U32(sp.Rank).U32(sp.Size).U64(n).U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record).I32(int32(sp.Fences & 15)).Ptr(sp.Trace)
	return a.k.drv.LaunchKernel(a.done, cuda.D1(1), cuda.D1(1), 0, s, &args)
}

// DoneReady enqueues, in one launch, the end of exec e (n bytes per rank,
// as Done) and the start of exec e+1 (as Ready), for execs with nothing
// between them on the stream. done and ready are the two kernels' specs
// (the same counter, rank and record; their own slots).
func (a *AGPKernels) DoneReady(s *cuda.Stream, done, ready AGPSpec, n uint64) error {
	if err := done.check("agp done+ready"); err != nil {
		return err
	}
	if err := ready.check("agp done+ready"); err != nil {
		return err
	}
	if done.Count != ready.Count || done.Rank != ready.Rank || done.Size != ready.Size {
		return fmt.Errorf("agp done+ready: the two specs differ in counter, rank or size: %w", ErrBadSpec)
	}
	var args cuda.KernelArgs
	args.Ptr(done.Count).Ptr(done.Remote).Ptr(done.Local).Ptr(ready.Remote).Ptr(ready.Local).U32(done.Rank).U32(done.Size).
		U64(n).U64(nanos(done.Timeout)).Ptr(done.Abort).Ptr(done.Record).I32(int32(done.Fences & 15)).Ptr(done.Trace)
	return a.k.drv.LaunchKernel(a.doneReady, cuda.D1(1), cuda.D1(1), 0, s, &args)
}

// AGP tag layout, as lc_agp_done builds it: the exec count in the high 23
// bits, n in the low 41.
const (
	AGPTagNBits = 41
	AGPTagNMask = 1<<AGPTagNBits - 1
	AGPTagKMask = 1<<(64-AGPTagNBits) - 1
)

// AGPTag is the value lc_agp_done writes for exec k of n bytes.
func AGPTag(k, n uint64) uint64 { return (k&AGPTagKMask)<<AGPTagNBits | n&AGPTagNMask }

// Kernel names of the one-launch execs (sync_agp_one.cu).
const (
	KernelAGPOne  = "lc_agp_one"
	KernelAGPLL   = "lc_agp_ll"
	KernelAGPCopy = "lc_agp_copy"
)

// AGPLLMax is the largest n (bytes per rank) of a low-latency exec; it
// matches LC_LL_MAX of sync_agp_one.cu.
const AGPLLMax = 64 << 10

// AGPLLSlot is the staging bytes of one writer's slot (LC_LL_SLOT): a
// header line and n/8 lines of 16 bytes.
const AGPLLSlot = 16 * (1 + AGPLLMax/8)

// AGPLLStageBytes is the staging area a rank of a job of size ranks needs
// for low-latency execs: two slots per writer.
func AGPLLStageBytes(size int) uint64 { return 2 * uint64(size) * AGPLLSlot }

const agpLLThreads = 512

// One enqueues a whole exec of n bytes per rank in one launch over the
// bandwidth grid (lc_agp_one): ready handshake, the puts and the own chunk
// (unless src is already in place), done handshake. ctl is 16 bytes of
// 8-aligned zeroed device memory, the launches' own (block arrivals, block
// ticket, go flag), shared with LL; bases is a device array of Size
// pointers to each rank's window data as mapped here. perSM caps the grid
// at that many blocks per SM (<= 0: the put kernel's default).
func (a *AGPKernels) One(s *cuda.Stream, ready, done AGPSpec, ctl, bases, src cuda.DevicePtr, n uint64, perSM int) error {
	if err := ready.check("agp exec"); err != nil {
		return err
	}
	if ctl == 0 || ctl%8 != 0 || bases == 0 || src == 0 {
		return fmt.Errorf("agp exec: %w", ErrBadSpec)
	}
	var args cuda.KernelArgs
	args.Ptr(ready.Count).Ptr(ctl).Ptr(ready.Remote).Ptr(ready.Local).Ptr(done.Remote).Ptr(done.Local).
		U32(ready.Rank).U32(ready.Size).Ptr(bases).Ptr(src).U64(n).U64(nanos(ready.Timeout)).Ptr(ready.Abort).Ptr(ready.Record)
	return a.k.launch(KernelAGPOne, a.k.bulkGridPer(n*uint64(ready.Size), perSM), bulkThreads, s, &args)
}

// Copy enqueues the data movement of an exec of n bytes per rank with no
// handshake (lc_agp_copy): the own chunk into place (unless src is already
// there) and the first m <= n bytes of the chunk to every peer. rank and
// size place the chunk; bases is as for One.
func (a *AGPKernels) Copy(s *cuda.Stream, rank, size uint32, bases, src cuda.DevicePtr, n, m uint64, perSM int) error {
	if rank >= size || bases == 0 || src == 0 || m > n {
		return fmt.Errorf("agp copy: %w", ErrBadSpec)
	}
	var args cuda.KernelArgs
	args.Ptr(bases).U32(rank).U32(size).Ptr(src).U64(n).U64(m)
	return a.k.launch(KernelAGPCopy, a.k.bulkGridPer(n+m*uint64(size-1), perSM), bulkThreads, s, &args)
}

// LL enqueues a low-latency exec of n <= AGPLLMax bytes per rank
// (lc_agp_ll): the chunk goes as flagged lines into every peer's staging
// area (stage is a device array of Size pointers to each rank's area, as
// mapped here, each AGPLLStageBytes(Size) of zeroed memory used by nothing
// else), and the peers' lines are unpacked into out (this rank's window
// data) at p * n.
//
// variant selects, for measurements, how lines are stored and polled
// (bit 0: plain stores instead of volatile ones; bit 1: a back-off between
// polls; bit 3: blocks of 64 threads, up to 128 of them; bits 4-5 = t:
// blocks of 256 << t threads, 512 being the default; bit 6: a system-wide
// fence at the end, left out by default since it measured about 1 us per
// exec);
// bit 2 skips receiving (a diagnostic: the peers' chunks are left out). 0
// is the default.
func (a *AGPKernels) LL(s *cuda.Stream, sp AGPSpec, ctl, stage, out, src cuda.DevicePtr, n uint64, variant int) error {
	if err := sp.check("agp low-latency exec"); err != nil {
		return err
	}
	if n > AGPLLMax || ctl == 0 || ctl%8 != 0 || stage == 0 || out == 0 || src == 0 {
		return fmt.Errorf("agp low-latency exec (n %d): %w", n, ErrBadSpec)
	}
	lines := 1 + (n+7)/8
	items := uint64(sp.Size-1) * lines // one thread per (peer, line) where the grid allows
	threads, most := uint64(agpLLThreads), uint64(32)
	if variant&8 != 0 {
		threads, most = 64, 128
	}
	if t := variant >> 4 & 3; t != 0 {
		threads = 256 << t // bits 4-5: blocks of 512, 1024 (or 2048: invalid, refused by the driver)
	}
	grid := min(max((items+threads-1)/threads, 1), most)
	var args cuda.KernelArgs
	args.Ptr(sp.Count).Ptr(ctl).Ptr(stage).U32(sp.Rank).U32(sp.Size).Ptr(out).Ptr(src).U64(n).
		U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record).I32(int32(variant))
	return a.k.launch(KernelAGPLL, uint32(grid), uint32(threads), s, &args)
}

// KernelAGPStaged is the staged exec's kernel (sync_agp_staged.cu).
const KernelAGPStaged = "lc_agp_staged"

// AGPStagedParts is the most parts (blocks) of a staged exec the flags
// have room for; it matches LC_ST_PARTS of sync_agp_staged.cu.
const AGPStagedParts = 256

// agpStagedThreads is the block of a staged exec, AGPStagedBlocks its
// default largest grid: small, since every block of every rank's launch
// must be able to run at once (a block waits for the peers' blocks), also
// with ranks that share a GPU.
const (
	agpStagedThreads = 512
	AGPStagedBlocks  = 32
)

// AGPStagedSlot is the bytes of one writer's staging slot for staged execs
// of at most max bytes per rank.
func AGPStagedSlot(max uint64) uint64 { return (max + 255) &^ 255 }

// AGPStagedBytes is the staged area a rank of a job of size ranks needs
// for staged execs of at most max bytes per rank: the parts' flags, then
// two slots per writer.
func AGPStagedBytes(size int, max uint64) uint64 {
	if max == 0 {
		return 0
	}
	return 2*uint64(size)*AGPStagedParts*16 + 2*uint64(size)*AGPStagedSlot(max)
}

// AGPStagedGrid returns the parts (one block each) of a staged exec of n
// bytes per rank and the bytes of each part but the last: parts of at
// least partMin bytes, at most most of them (and AGPStagedParts), each a
// multiple of 16 bytes. It depends on its arguments only, so every rank
// cuts the chunk alike.
func AGPStagedGrid(n, partMin, most uint64) (parts, part uint64) {
	partMin = max(partMin, 16)
	most = min(max(most, 1), AGPStagedParts)
	parts = min(max((n+partMin-1)/partMin, 1), most)
	part = ((n+parts-1)/parts + 15) &^ 15
	if part == 0 {
		part = 16
	}
	return max((n+part-1)/part, 1), part
}

// Staged enqueues a staged exec of n bytes per rank (lc_agp_staged): each
// part of the chunk goes with plain stores into every peer's staging slot,
// followed by its flag; each part of every peer is copied out of this
// rank's staging once its flag shows this exec. stage is as for LL (each
// area holds the flagged lines' AGPLLStageBytes, then AGPStagedBytes(Size,
// slot) for the staged execs, at off); slot is AGPStagedSlot of the
// largest staged n; partMin as for AGPStagedGrid.
func (a *AGPKernels) Staged(s *cuda.Stream, sp AGPSpec, ctl, stage cuda.DevicePtr, off, slot uint64, out, src cuda.DevicePtr, n, partMin, blocks uint64) error {
	if err := sp.check("agp staged exec"); err != nil {
		return err
	}
	if n == 0 || n > slot || ctl == 0 || ctl%8 != 0 || stage == 0 || out == 0 || src == 0 || off%16 != 0 || slot%16 != 0 {
		return fmt.Errorf("agp staged exec (n %d, slot %d): %w", n, slot, ErrBadSpec)
	}
	if blocks == 0 {
		blocks = AGPStagedBlocks
	}
	parts, part := AGPStagedGrid(n, partMin, blocks)
	var args cuda.KernelArgs
	args.Ptr(sp.Count).Ptr(ctl).Ptr(stage).U64(off).U64(slot).U32(sp.Rank).U32(sp.Size).Ptr(out).Ptr(src).U64(n).
		U64(part).U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record)
	return a.k.launch(KernelAGPStaged, uint32(parts), agpStagedThreads, s, &args)
}
