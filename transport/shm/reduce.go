package shm

import "github.com/luacoll/luacoll/transport"

// Reduce implements transport.Reducer: the reduction runs on the stream,
// in order (spread over goroutines for large ranges).
func (*HostBackend) Reduce(s transport.Stream, dst, src transport.Addr, count uint64, t transport.DType, op transport.RedOp) {
	s.Host(func() error {
		transport.ReduceHost(dst, src, count, t, op)
		return nil
	})
}

var _ transport.Reducer = (*HostBackend)(nil)
