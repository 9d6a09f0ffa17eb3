package kernels

import (
	"fmt"

	"github.com/luacoll/luacoll/cuda"
)

// ReduceKernel names the reduce kernel of t and op, e.g. "lc_reduce_bf16_sum".
func ReduceKernel(t DType, op RedOp) string { return "lc_reduce_" + t.String() + "_" + op.String() }

// reduceKernels lists every reduce kernel (for Names).
func reduceKernels() []string {
	var out []string
	for _, t := range DTypes() {
		for _, op := range RedOps() {
			out = append(out, ReduceKernel(t, op))
		}
	}
	return append(out, KernelReduceChain)
}

// Reduce enqueues dst[i] = dst[i] op src[i] for count elements of type t
// (ReduceBytes on the device). dst and src must be aligned to the element
// size; src may be a peer's memory this device can access.
func (k *Kernels) Reduce(s *cuda.Stream, dst, src cuda.DevicePtr, count uint64, t DType, op RedOp) error {
	if t >= numDTypes || op >= numRedOps {
		return fmt.Errorf("reduce: %w: type %d, op %d", ErrBadSpec, t, op)
	}
	if uint64(dst)%t.Size() != 0 || uint64(src)%t.Size() != 0 {
		return fmt.Errorf("reduce %s at %#x from %#x: %w: not aligned to the element", t, uint64(dst), uint64(src), ErrBadSpec)
	}
	if count == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.Ptr(dst).Ptr(src).U64(count)
	return k.launch(ReduceKernel(t, op), k.bulkGrid(count*t.Size()), bulkThreads, s, &a)
}

// KernelReduceChain is the reduce chain as a kernel of its own
// (ReduceChain).
const KernelReduceChain = "lc_reduce_chain_k"

// ReduceChain enqueues dst op= srcs[0], then dst op= srcs[1], ... for
// count elements of type t in one pass (1 to PlanChainMax sources), each
// element rounded after each source as Reduce rounds it, so the bits are
// those of Reduce called once a source. Every pointer and the byte count
// must be 16-byte aligned; no source may overlap dst.
func (k *Kernels) ReduceChain(s *cuda.Stream, dst cuda.DevicePtr, srcs []cuda.DevicePtr, count uint64, t DType, op RedOp) error {
	if t >= numDTypes || op >= numRedOps {
		return fmt.Errorf("reduce chain: %w: type %d, op %d", ErrBadSpec, t, op)
	}
	if len(srcs) == 0 || len(srcs) > PlanChainMax {
		return fmt.Errorf("reduce chain of %d sources: %w: 1 to %d", len(srcs), ErrBadSpec, PlanChainMax)
	}
	n := count * t.Size()
	if !ChainAligned(dst, srcs, n) {
		return fmt.Errorf("reduce chain %s into %#x, %d bytes: %w: not 16-byte aligned", t, uint64(dst), n, ErrBadSpec)
	}
	if n == 0 {
		return nil
	}
	var a cuda.KernelArgs
	a.U32(uint32(t)).U32(uint32(op)).Ptr(dst).U64(n / 16).U32(uint32(len(srcs)))
	for i := range PlanChainMax {
		var p cuda.DevicePtr
		if i < len(srcs) {
			p = srcs[i]
		}
		a.Ptr(p)
	}
	return k.launch(KernelReduceChain, k.bulkGrid(n), bulkThreads, s, &a)
}

// ChainAligned reports whether dst, every source and n are 16-byte
// aligned, as ReduceChain needs.
func ChainAligned(dst cuda.DevicePtr, srcs []cuda.DevicePtr, n uint64) bool {
	v := uint64(dst) | n
	for _, p := range srcs {
		v |= uint64(p)
	}
	return v%16 == 0
}
