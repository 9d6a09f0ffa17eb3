package kernels

import (
	"fmt"
	"testing"

	"github.com/luacoll/luacoll/cuda"
)

// TestReduceKernel: every type and op on the device gives the bits of the
// host reference, for lengths and offsets that exercise the vector body,
// the head and tail elements and the unaligned path (GPU only).
func TestReduceKernel(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	const size = 1 << 20
	dst, src := alloc(t, d, size), alloc(t, d, size)
	for _, dt := range DTypes() {
		for _, op := range RedOps() {
			for _, c := range []struct{ dOff, sOff, count uint64 }{
				{0, 0, 1}, {0, 0, 4096 + 3}, {dt.Size(), dt.Size(), 777}, {dt.Size(), 0, 1000}, {16, 48, (size - 64) / dt.Size()},
			} {
				n := c.count * dt.Size()
				a, b := make([]byte, n), make([]byte, n)
				FillRand(a, uint64(dt)<<8|uint64(op))
				FillRand(b, uint64(dt)<<8|uint64(op)+1)
				if dt.Float() {
					saneFloats(a, dt)
					saneFloats(b, dt)
				}
				must(t, d.MemcpyHtoD(dst.Add(c.dOff), a))
				must(t, d.MemcpyHtoD(src.Add(c.sOff), b))
				// A copy from pageable memory may return before its DMA
				// lands, and s does not wait for the default stream.
				must(t, d.DefaultStream().Synchronize())
				must(t, e.k.Reduce(s, dst.Add(c.dOff), src.Add(c.sOff), c.count, dt, op))
				must(t, s.Synchronize())
				got := read(t, d, dst.Add(c.dOff), int(n))
				ReduceBytes(a, b, dt, op)
				if string(got) != string(a) {
					t.Fatalf("%s %s, %d elements at +%d from +%d: device differs from the host reference", dt, op, c.count, c.dOff, c.sOff)
				}
			}
		}
	}
	if err := e.k.Reduce(s, dst.Add(1), src, 8, F32, Sum); err == nil {
		t.Error("a misaligned destination was accepted")
	}
}

// saneFloats turns random bits into finite values of moderate size (NaN
// payloads are not compared, and large random exponents overflow).
func saneFloats(p []byte, t DType) {
	sz := int(t.Size())
	for i := 0; i+sz <= len(p); i += sz {
		switch t {
		case F32:
			p[i+3] = p[i+3]&0x80 | 0x3f // exponent near 0: [1, 2) or (-2, -1], scaled by the low bits
			p[i+2] &= 0x7f
		case F64:
			p[i+7] = p[i+7]&0x80 | 0x3f
			p[i+6] &= 0x0f
		case F16:
			p[i+1] = p[i+1]&0x80 | 0x38 | p[i+1]&0x03
		case BF16:
			p[i+1] = p[i+1]&0x80 | 0x3f
			p[i] &= 0x7f
		}
	}
}

// BenchmarkReduceKernel: the reduce kernel at 256 MiB beside a plain
// device copy of the same size in the same run; bytes counted are those
// read and written (reduce: 3 x n, copy: 2 x n), so the two rates compare
// directly (the goal: reduce >= 0.9 x copy).
func BenchmarkReduceKernel(b *testing.B) {
	e := needKernels(b)
	d := e.d
	s, err := d.StreamCreate()
	must(b, err)
	defer s.Destroy()
	const n = 256 << 20
	dst, err := d.MemAlloc(n)
	must(b, err)
	defer d.MemFree(dst)
	src, err := d.MemAlloc(n)
	must(b, err)
	defer d.MemFree(src)
	must(b, e.k.FillByte(s, dst, n, 0))
	must(b, e.k.FillByte(s, src, n, 0))
	for _, dt := range []DType{F32, BF16} {
		b.Run(fmt.Sprintf("reduce-%s", dt), func(b *testing.B) {
			b.SetBytes(3 * n)
			for b.Loop() {
				must(b, e.k.Reduce(s, dst, src, n/dt.Size(), dt, Sum))
				must(b, s.Synchronize()) // time the kernel, not its enqueue
			}
		})
	}
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(2 * n)
		for b.Loop() {
			must(b, d.MemcpyAsync(dst, src, n, s))
			must(b, s.Synchronize())
		}
	})
}

// TestReduceChainKernelTurns: past the size where the chain kernel's grid
// has a thread for every 16-byte vector (its launch caps the blocks), each
// thread takes two vectors a turn, then what is left one at a time; the
// bits are still those of the reductions one after another (GPU only).
func TestReduceChainKernelTurns(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	const n = 24<<20 + 48 // past the cap, and a tail of odd vectors
	dst := alloc(t, d, n)
	var srcs []cuda.DevicePtr
	for range 3 {
		srcs = append(srcs, alloc(t, d, n))
	}
	for _, c := range []struct {
		dt DType
		op RedOp
	}{{F32, Sum}, {BF16, Max}} {
		want := make([]byte, n)
		FillRand(want, 7)
		saneFloats(want, c.dt)
		must(t, d.MemcpyHtoD(dst, want))
		for j, src := range srcs {
			b := make([]byte, n)
			FillRand(b, uint64(j)+11)
			saneFloats(b, c.dt)
			must(t, d.MemcpyHtoD(src, b))
			ReduceBytes(want, b, c.dt, c.op)
		}
		must(t, d.DefaultStream().Synchronize())
		must(t, e.k.ReduceChain(s, dst, srcs, n/c.dt.Size(), c.dt, c.op))
		must(t, s.Synchronize())
		if got := read(t, d, dst, n); string(got) != string(want) {
			t.Fatalf("%s %s, chain of 3, %d bytes: device differs from 3 reductions on the host", c.dt, c.op, n)
		}
	}
}

// BenchmarkReduceChain: k sources of n bytes reduced into one place, as
// one launch of the chain kernel and as k launches of the reduce kernel
// (f32 sum), sizes where a plan's reductions run one way or the other
// (transport/gpu's planChainMax). Bytes counted are the sources'
// (k x n), the same for both, so the rates compare directly.
func BenchmarkReduceChain(b *testing.B) {
	e := needKernels(b)
	d := e.d
	s, err := d.StreamCreate()
	must(b, err)
	defer s.Destroy()
	const most, k = 64 << 20, 3
	bufs := make([]cuda.DevicePtr, k+1)
	for i := range bufs {
		p, err := d.MemAlloc(most)
		must(b, err)
		defer d.MemFree(p)
		must(b, e.k.FillByte(s, p, most, 0))
		bufs[i] = p
	}
	dst, srcs := bufs[0], bufs[1:]
	for _, n := range []uint64{1 << 20, 4 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("chain-%d-%dMiB", k, n>>20), func(b *testing.B) {
			b.SetBytes(int64(k * n))
			for b.Loop() {
				must(b, e.k.ReduceChain(s, dst, srcs, n/4, F32, Sum))
				must(b, s.Synchronize())
			}
		})
		b.Run(fmt.Sprintf("singles-%d-%dMiB", k, n>>20), func(b *testing.B) {
			b.SetBytes(int64(k * n))
			for b.Loop() {
				for _, src := range srcs {
					must(b, e.k.Reduce(s, dst, src, n/4, F32, Sum))
				}
				must(b, s.Synchronize())
			}
		})
	}
}

// TestReduceChainKernel: a chain of k sources gives the bits of k Reduce
// calls one after another, for every type and op (GPU only).
func TestReduceChainKernel(t *testing.T) {
	e := needKernels(t)
	d := e.d
	s := newStream(t, d)
	const size = 64<<10 + 32
	dst := alloc(t, d, size)
	var srcs []cuda.DevicePtr
	for range PlanChainMax {
		srcs = append(srcs, alloc(t, d, size))
	}
	for _, dt := range DTypes() {
		for _, op := range RedOps() {
			for _, k := range []int{1, 3, PlanChainMax} {
				for _, n := range []uint64{16, size - 32} {
					seed := uint64(dt)<<16 | uint64(op)<<8 | uint64(k)
					want := make([]byte, n)
					FillRand(want, seed)
					if dt.Float() {
						saneFloats(want, dt)
					}
					must(t, d.MemcpyHtoD(dst, want))
					for j := range k {
						b := make([]byte, n)
						FillRand(b, seed+uint64(j)+1)
						if dt.Float() {
							saneFloats(b, dt)
						}
						must(t, d.MemcpyHtoD(srcs[j], b))
						ReduceBytes(want, b, dt, op)
					}
					must(t, d.DefaultStream().Synchronize())
					must(t, e.k.ReduceChain(s, dst, srcs[:k], n/dt.Size(), dt, op))
					must(t, s.Synchronize())
					if got := read(t, d, dst, int(n)); string(got) != string(want) {
						t.Fatalf("%s %s, chain of %d, %d bytes: device differs from %d reductions on the host", dt, op, k, n, k)
					}
				}
			}
		}
	}
}
