package shm

import "github.com/luacoll/luacoll/transport"

// Reduce implements transport.Reducer: the reduction runs on the stream,
// in order (spread over goroutines for large ranges); on a host stream as
// one of its operations, with nothing allocated.
func (*HostBackend) Reduce(s transport.Stream, dst, src transport.Addr, count uint64, t transport.DType, op transport.RedOp) {
	if hr, ok := s.(transport.HostReducer); ok {
		hr.Reduce(dst, src, count, t, op)
		return
	}
	s.Host(func() error {
		transport.ReduceHost(dst, src, count, t, op)
		return nil
	})
}

var _ transport.Reducer = (*HostBackend)(nil)
