package gpu

import (
	"errors"

	"github.com/luacoll/luacoll/cuda"
	"github.com/luacoll/luacoll/transport"
)

// Reduce implements transport.Reducer: the reduce kernel on the rank's
// stream, in order; src may be a peer's memory mapped over NVLink (the
// kernel reads it directly).
func (b *CUDABackend) Reduce(s transport.Stream, dst, src transport.Addr, count uint64, t transport.DType, op transport.RedOp) {
	cs, ok := s.(*CUDAStream)
	if !ok {
		s.Host(func() error { return errNotCUDAStream })
		return
	}
	cs.enqueue(func() error {
		return b.k.Reduce(cs.s, cuda.DevicePtr(dst), cuda.DevicePtr(src), count, t, op)
	})
}

// errNotCUDAStream is what a reduction enqueued on another kind of stream
// (a host view of a window) reports.
var errNotCUDAStream = errors.New("reduce: a device reduction needs the rank's CUDA stream")

var _ transport.Reducer = (*CUDABackend)(nil)
