package kernels

import (
	"fmt"
	"time"

	"github.com/luacoll/luacoll/cuda"
)

// Kernel names of the persistent all-gather's synchronization (sync_agp.cu).
const (
	KernelAGPReady = "lc_agp_ready"
	KernelAGPDone  = "lc_agp_done"
)

// AGPKernels launches the persistent all-gather's two one-thread
// synchronization kernels. It is read-only after AGP returns.
type AGPKernels struct {
	k           *Kernels
	ready, done *cuda.Function
}

// AGP looks up the persistent all-gather kernels in the loaded program.
func (k *Kernels) AGP() (*AGPKernels, error) {
	a := &AGPKernels{k: k}
	var err error
	if a.ready, err = k.mod.Function(KernelAGPReady); err != nil {
		return nil, fmt.Errorf("persistent all-gather kernels: %w", err)
	}
	if a.done, err = k.mod.Function(KernelAGPDone); err != nil {
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
}

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
	args.Ptr(sp.Count).Ptr(sp.Remote).Ptr(sp.Local).U32(sp.Rank).U32(sp.Size).U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record)
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
	args.Ptr(sp.Count).Ptr(sp.Remote).Ptr(sp.Local).U32(sp.Rank).U32(sp.Size).U64(n).U64(nanos(sp.Timeout)).Ptr(sp.Abort).Ptr(sp.Record)
	return a.k.drv.LaunchKernel(a.done, cuda.D1(1), cuda.D1(1), 0, s, &args)
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

// KernelAGPSmall runs a whole small exec in one launch (sync_agp_small.cu).
const KernelAGPSmall = "lc_agp_small"

// AGPSmallThreads is the block size of the one-launch exec.
const AGPSmallThreads = 512

// Small enqueues one whole exec of n bytes per rank in a single launch of
// one block: ready handshake, the copies with the block's threads (own
// chunk unless src is already in place, then every peer), done handshake.
// bases is a device array of Size pointers to each rank's window data as
// mapped here; ready and done are the specs the two-kernel path uses.
func (a *AGPKernels) Small(s *cuda.Stream, ready, done AGPSpec, bases, src cuda.DevicePtr, n uint64) error {
	if err := ready.check("agp small"); err != nil {
		return err
	}
	var args cuda.KernelArgs
	args.Ptr(ready.Count).Ptr(ready.Remote).Ptr(ready.Local).Ptr(done.Remote).Ptr(done.Local).U32(ready.Rank).U32(ready.Size).
		Ptr(bases).Ptr(src).U64(n).U64(nanos(ready.Timeout)).Ptr(ready.Abort).Ptr(ready.Record)
	return a.k.launch(KernelAGPSmall, 1, AGPSmallThreads, s, &args)
}
