package transport

import (
	"runtime"
	"sync"

	"github.com/luacoll/luacoll/kernels"
)

// DType is the element type of a reduction (the device's, kernels.DType).
type DType = kernels.DType

// RedOp is a reduction operator (kernels.RedOp).
type RedOp = kernels.RedOp

// ParseDType and ParseRedOp read the names scripts use ("bf16", "sum").
var (
	ParseDType = kernels.ParseDType
	ParseRedOp = kernels.ParseRedOp
)

// Reducer is a backend that reduces: Reduce enqueues on s, in stream order,
// dst[i] = dst[i] op src[i] for count elements of type t. dst is this
// rank's memory; src may be any memory this rank maps (its own, or a peer's
// part of a window over shared memory or NVLink). The caller checks
// alignment, bounds and overlap.
type Reducer interface {
	Reduce(s Stream, dst, src Addr, count uint64, t DType, op RedOp)
}

// Reduction sizes of the host: from ReduceSplit bytes of dst a reduction is
// spread over goroutines, each taking ReducePart bytes at least.
const (
	ReduceSplit = 1 << 20
	ReducePart  = 512 << 10
)

// ReduceHost runs the reduction on the calling goroutine and, for large
// ranges, on helpers (at most GOMAXPROCS and 8 in all), each on its own
// part of the range, cut at 4 KiB boundaries.
func ReduceHost(dst, src Addr, count uint64, t DType, op RedOp) {
	n := count * t.Size()
	if n == 0 {
		return
	}
	d, s := HostBytes(dst, n), HostBytes(src, n)
	parts := min(uint64(runtime.GOMAXPROCS(0)), 8, n/ReducePart)
	if n < ReduceSplit || parts < 2 {
		kernels.ReduceBytes(d, s, t, op)
		return
	}
	per := (n/parts + 4095) &^ 4095
	var wg sync.WaitGroup
	for off := per; off < n; off += per {
		end := min(off+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			kernels.ReduceBytes(d[off:end], s[off:end], t, op)
		}()
	}
	kernels.ReduceBytes(d[:per], s[:per], t, op)
	wg.Wait()
}
