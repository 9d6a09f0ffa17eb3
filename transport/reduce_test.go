package transport

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/luacoll/luacoll/kernels"
)

// mapped returns n bytes of anonymous mapped memory (outside the Go heap,
// as window memory is).
func mapped(t testing.TB, n int) []byte {
	p, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(p) })
	return p
}

// TestReduceHostSplit: a reduction spread over goroutines (sizes past
// ReduceSplit, odd lengths) gives the bits of one loop over the range.
func TestReduceHostSplit(t *testing.T) {
	for _, n := range []int{ReduceSplit - 8, ReduceSplit + 8, 3*ReduceSplit + 4104} {
		for _, dt := range []DType{kernels.F32, kernels.BF16, kernels.U64} {
			n := n - n%int(dt.Size())
			d, s := mapped(t, n), mapped(t, n)
			FillRand(d, 1)
			FillRand(s, 2)
			want := append([]byte(nil), d...)
			kernels.ReduceBytes(want, s, dt, kernels.Sum)
			ReduceHost(AddrOf(d), AddrOf(s), uint64(n)/dt.Size(), dt, kernels.Sum)
			if string(d) != string(want) {
				t.Fatalf("%s, %d bytes: split result differs", dt, n)
			}
		}
	}
}

// BenchmarkReduceHost measures the host reduction (bytes: the
// destination's, read and written, plus the source's).
func BenchmarkReduceHost(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 4 << 20, 64 << 20} {
		for _, dt := range []DType{kernels.F32, kernels.BF16} {
			b.Run(fmt.Sprintf("%s/%dK", dt, n>>10), func(b *testing.B) {
				d, s := mapped(b, n), mapped(b, n)
				b.SetBytes(int64(3 * n))
				for b.Loop() {
					ReduceHost(AddrOf(d), AddrOf(s), uint64(n)/dt.Size(), dt, kernels.Sum)
				}
			})
		}
	}
}
