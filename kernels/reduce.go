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
	return out
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
